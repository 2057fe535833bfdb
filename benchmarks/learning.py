"""``python benchmarks/learning.py``, the learning benchmark's old command, still runs it: it is
``python -m benchmarks.learning`` now (benchmarks/learning/). Kept only while callers outside benchmarks/
name this path (tests/training/test_config_file.py; fleet_rl/training/before_after.py's note): delete it
when they say ``python -m benchmarks.learning``. (``import benchmarks.learning`` finds the package, never
this file.)"""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path[0] = str(Path(__file__).resolve().parents[1])  # the repository, not benchmarks/
    from fleet_rl.training.config_file import exit_on_a_bad_config

    exit_on_a_bad_config(sys.argv[1:])  # "learning.py: error: --config ...", before the heavy imports
    from benchmarks.learning.benchmark import main

    main()
