"""``python -m benchmarks.learning``: the learning benchmark's command line
(benchmarks/learning/benchmark.py)."""

import sys

from benchmarks.learning import PROGRAM
from fleet_rl.training.config_file import exit_on_a_bad_config

if __name__ == "__main__":  # a bad --config: one line and exit code 2, before torch, transformers and
    exit_on_a_bad_config(sys.argv[1:], PROGRAM)  # bitsandbytes (which logs on import) are imported

from benchmarks.learning.benchmark import main  # noqa: E402

if __name__ == "__main__":
    main()
