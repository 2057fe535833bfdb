"""The learning benchmark (``python -m benchmarks.learning``; ``benchmark.py`` is its command line, the
other modules its parts) and the measurements around it: the SFT curve (``sft_curve``), where a policy's job
list ends (``list_continuation``) and the held-out scenarios' fingerprint (``scenario_fingerprint``)."""

PROGRAM = "python -m benchmarks.learning"  # how the benchmark is run, in its usage and error lines
