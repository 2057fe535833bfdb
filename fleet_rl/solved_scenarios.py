"""The one cache of solved scenarios, at the boundary where a dataset row's scenario meets the kernel.

Solving a scenario (``fleet_rl.kernel.solver.solve_scenario``: job tables, each job's best value per GPU
count, the exact optimum) costs ~2-15 ms on one core; scoring a plan against the result costs microseconds.
GRPO scores a prompt's scenario at every step that draws it, through every reward function, and the reward
only gets the dataset row's scenario JSON (TRL passes columns as lists of strings). So the reward call, and
whatever else starts from a scenario rather than a ``SolvedScenario`` (the scenario generator's check, the
``optimal`` baseline, multi-agent requests), looks it up here; everything below takes the
``SolvedScenario`` as an argument and keeps nothing.

Keys are the scenario's JSON text (``Scenario.to_json()``, the dataset column; a string keeps its hash, so a
hit costs one dict lookup); a ``Scenario`` value is keyed by its JSON too, so both spellings of one scenario
share an entry. Least recently used entries go beyond ``MAX_ENTRIES`` (a medium scenario's entry is ~60 kB).
Thread-safe; two threads missing the same scenario at once may both solve it (the results are equal).
"""

from __future__ import annotations

import collections
import threading

from fleet_rl.kernel.solver import SolvedScenario, solve_scenario
from fleet_rl.scenario import Scenario

__all__ = ["MAX_ENTRIES", "SolvedScenarioCache", "solved_scenario"]

MAX_ENTRIES = 4096


class SolvedScenarioCache:
    """Solved scenarios by scenario JSON text, least recently used out first."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: collections.OrderedDict[str, SolvedScenario] = collections.OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __call__(self, scenario: Scenario | str) -> SolvedScenario:
        """The ``SolvedScenario`` of a ``Scenario`` or its JSON text (``ValueError`` for JSON that is not
        a valid scenario, ``TypeError`` for anything else)."""
        if isinstance(scenario, str):
            key = scenario
        elif isinstance(scenario, Scenario):
            key = scenario.to_json()
        else:
            raise TypeError(f"a scenario is a Scenario or its JSON text, not {type(scenario).__name__}")
        with self._lock:
            solved = self._entries.get(key)
            if solved is not None:
                self._entries.move_to_end(key)
                self.hits += 1
                return solved
            self.misses += 1
        solved = solve_scenario(scenario if isinstance(scenario, Scenario) else Scenario.from_json(key))
        with self._lock:
            self._entries[key] = solved
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return solved

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


solved_scenario = SolvedScenarioCache()
"""The process's cache: ``solved_scenario(scenario_or_json) -> SolvedScenario``."""
