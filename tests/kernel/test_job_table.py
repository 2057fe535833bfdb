"""Stacking job tables from their packed blocks (``PackedJobTable.concatenate``, what a batch spanning
scenarios is simulated against) gives exactly ``JobTable.concatenate``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fleet_rl.kernel.job_table import JobTable, PackedJobTable
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.scenario_generator import make_scenario


def assert_same_tables(actual: JobTable, expected: JobTable) -> None:
    for name in JobTable.__dataclass_fields__:
        a, b = getattr(actual, name), getattr(expected, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), name
        assert a.flags.c_contiguous, name


@pytest.mark.parametrize("count", [2, 3, 16])
def test_packed_stacking_equals_job_table_concatenate(count):
    solved = [
        solve_scenario(make_scenario(task, seed))
        for seed in range(count)
        for task in ("easy", "hard", "multiagent")
    ][:count]
    solved.append(solved[0])  # a table twice
    stacked = PackedJobTable.concatenate([s.packed_table for s in solved])
    assert_same_tables(stacked, JobTable.concatenate([s.table for s in solved]))
    assert_same_tables(solved[1].packed_table.unpacked(), solved[1].table)


def test_tables_of_another_layout_are_stacked_field_by_field():
    table = solve_scenario(make_scenario("medium", 3)).table
    odd = dataclasses.replace(table, tdp_w=table.tdp_w.astype(np.int64))  # integer wattage: another layout
    stacked = PackedJobTable.concatenate([table.packed(), odd.packed(), table.packed()])
    expected = JobTable.concatenate([table, odd, table])
    assert_same_tables(stacked, expected)
