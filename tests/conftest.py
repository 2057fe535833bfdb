"""A temporary alias: ``fleet_rl.bench`` is ``benchmarks/speed.py``, for test_throughput_parsing.py only.

The speed benchmark left the package (``fleet_rl/bench.py`` became ``benchmarks/speed.py``), but
tests/rewards/test_throughput_parsing.py, which is being rewritten with ``rewards/parsing.py`` on another
branch, still imports its completion generator as ``from fleet_rl import bench``. Delete this file once that
import reads ``from benchmarks import speed``. (It sits at the root of tests/ because tests/kernel's
conftest is imported by name, ``from conftest import ...``, and must be the last conftest loaded.)
"""

import sys

from benchmarks import speed

sys.modules.setdefault("fleet_rl.bench", speed)
