"""``score_batch`` simulates against an arena of job tables (``fleet_rl/kernel/batch_scoring.py``): the same
results as against the batch's stacked tables, while slots are handed out, freed with their scenarios and
reused, and while the arena grows."""

from __future__ import annotations

import dataclasses
import gc
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from benchmarks import speed
from fleet_rl.kernel import batch_scoring
from fleet_rl.kernel.job_table import JobTable
from fleet_rl.kernel.simulate import RowResults, job_values, simulate
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.scenario_generator import make_scenario


def uncached(task: str, seed: int):
    """A ``SolvedScenario`` outside ``solve_scenario``'s cache: it dies with its last reference."""
    return solve_scenario.__wrapped__(make_scenario(task, seed))


def plans_for(solved_list, rng: random.Random) -> list:
    return [
        solved.optimal_plan if rng.random() < 0.3 else speed.perturbed_plan(solved.optimal_plan, rng)
        for solved in solved_list
    ]


def assert_matches_stacked_tables(solved_list, plans) -> None:
    scored = batch_scoring.score_batch(solved_list, plans)
    table = JobTable.concatenate([solved.table for solved in scored.solved])
    reference = np.concatenate([solved.reference_tokens_per_s for solved in scored.solved])
    results = simulate(table, scored.rows)
    values = job_values(table, scored.rows, results, reference)
    for name in RowResults.__dataclass_fields__:
        expected, actual = getattr(results, name), getattr(scored.results, name)
        assert_same(actual, expected, name)
    assert_same(scored.values, values, "values")
    for name in JobTable.__dataclass_fields__:  # the lazily stacked table is the stacked table
        assert_same(getattr(scored.table, name), getattr(table, name), name)


def assert_same(actual: np.ndarray, expected: np.ndarray, name: str) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, name
    assert np.array_equal(actual, expected, equal_nan=actual.dtype.kind == "f"), name


def test_slots_are_freed_with_their_scenarios_and_reused():
    rng = random.Random(0)
    kept = [uncached("hard", seed) for seed in range(3)]
    arena, _ = batch_scoring._placed(kept[0])
    used = []
    for _ in range(4):  # new SolvedScenario objects each round (with the same numbers of jobs)
        batch = [uncached(task, seed) for task in ("medium", "multiagent") for seed in range(1000, 1004)]
        mixed = [*batch, *kept, batch[0], kept[1]]
        assert_matches_stacked_tables(mixed, plans_for(mixed, rng))
        used.append(arena.used)
        del batch, mixed
        gc.collect()
    # the batch's slots went back to the free list and were taken again: the arena stopped growing
    assert used[1:] == used[:1] * 3
    assert_matches_stacked_tables(kept, plans_for(kept, rng))


def test_growing_keeps_the_scenarios_already_placed():
    rng = random.Random(1)
    first = [uncached("hard", 2000 + s) for s in range(2)]
    assert_matches_stacked_tables(first, plans_for(first, rng))
    arena, _ = batch_scoring._placed(first[0])
    capacity = arena.capacity
    many = [uncached("hard", 2100 + s) for s in range(capacity // 3 + 1)]  # more jobs than the free slots
    assert_matches_stacked_tables(many, plans_for(many, rng))
    assert arena.capacity > capacity
    assert_matches_stacked_tables(first, plans_for(first, rng))


def test_tables_of_another_layout_are_stacked_instead():
    rng = random.Random(2)
    solved = uncached("medium", 3000)
    table = solved.table
    # the same values, another dtype: integer wattage
    odd = dataclasses.replace(solved, table=dataclasses.replace(table, tdp_w=table.tdp_w.astype(np.int64)))
    mixed = [solved, odd, solved]
    assert_matches_stacked_tables(mixed, plans_for(mixed, rng))
    scored = batch_scoring.score_batch(mixed, [solved.optimal_plan] * 3)
    assert scored.objective[0] == scored.objective[1] == scored.objective[2] == solved.optimal_objective


def test_threads_placing_scenarios_at_once_get_the_same_results():
    def work(seed: int) -> None:
        rng = random.Random(seed)
        for round_ in range(3):
            batch = [uncached("hard", 4000 + 100 * seed + 10 * round_ + s) for s in range(6)]
            assert_matches_stacked_tables(batch, plans_for(batch, rng))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(work, range(4)))  # re-raises any failure
