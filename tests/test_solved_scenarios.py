"""The cache of solved scenarios (``fleet_rl/solved_scenarios.py``): one entry per scenario whichever way it
is named, least recently used out first, and clear errors for what is not a scenario."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from fleet_rl import make_scenario
from fleet_rl.kernel import solve_scenario
from fleet_rl.solved_scenarios import SolvedScenarioCache, solved_scenario


def test_a_scenario_and_its_json_share_one_entry():
    cache = SolvedScenarioCache()
    scenario = make_scenario("medium", 5)
    solved = cache(scenario)
    assert cache(scenario.to_json()) is solved and cache(scenario) is solved
    assert (cache.hits, cache.misses, len(cache)) == (2, 1, 1)
    assert solved.scenario == scenario
    assert solved.optimal_plan == solve_scenario(scenario).optimal_plan


def test_the_least_recently_used_entry_goes_first():
    cache = SolvedScenarioCache(max_entries=2)
    first, second, third = (make_scenario("easy", seed).to_json() for seed in range(3))
    kept = cache(first)
    cache(second)
    assert cache(first) is kept  # first is now the most recently used
    cache(third)  # evicts second
    assert len(cache) == 2 and cache(first) is kept
    misses = cache.misses
    cache(second)
    assert cache.misses == misses + 1
    cache.clear()
    assert len(cache) == 0 and cache.hits == cache.misses == 0


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        ("{", ValueError, "not valid JSON"),
        ('{"cluster": 1}', ValueError, "invalid scenario"),
        (7, TypeError, "Scenario or its JSON text"),
        (None, TypeError, "Scenario or its JSON text"),
    ],
)
def test_what_is_not_a_scenario_is_refused_clearly(value, error, match):
    cache = SolvedScenarioCache()
    with pytest.raises(error, match=match):
        cache(value)
    assert len(cache) == 0


def test_threads_share_the_cache():
    cache = SolvedScenarioCache()
    texts = [make_scenario("medium", seed).to_json() for seed in range(4)] * 4
    with ThreadPoolExecutor(4) as pool:
        solved = list(pool.map(cache, texts))
    for text, result in zip(texts, solved, strict=True):
        assert cache(text).optimal_plan == result.optimal_plan
    assert len(cache) == 4


def test_the_process_cache_is_the_one_the_generator_fills():
    scenario = make_scenario("hard", 11)  # the generator's check solves it into the process cache
    assert solved_scenario(scenario.to_json()) is solved_scenario(scenario)
