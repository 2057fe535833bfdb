"""row_distances: the measures agree with the kernel's own faults, and one case computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from fleet_rl import Scenario, make_scenario
from fleet_rl.baselines import random_plan, random_split
from fleet_rl.kernel.batch_scoring import score_batch
from fleet_rl.kernel.constants import OOM, TOO_SLOW
from fleet_rl.kernel.distances import row_distances
from fleet_rl.solved_scenarios import solved_scenario


@pytest.mark.parametrize("task", ["easy", "medium", "hard", "multiagent"])
def test_distances_agree_with_the_kernels_faults(task):
    """Over memory ⇔ memory_ratio > 1; too slow ⇔ floor_ratio < 1 (where the formats give a figure); a
    categorical fault (unsupported, unstable) ⇔ broken_settings > 0; for every placed row."""
    placed_rows = 0
    for seed in range(40):
        scenario = make_scenario(task, seed)
        solved = solved_scenario(scenario)
        plans = [random_split(scenario, k) for k in range(4)] + [random_plan(scenario, k) for k in range(4)]
        scored = score_batch([solved] * len(plans), plans)
        results, rows = scored.results, scored.rows
        distances = row_distances(scored.table, rows, results)
        placed = (rows.gpus > 0) & ~rows.invalid
        over_memory = distances.memory_ratio > 1
        too_slow = (distances.floor_ratio < 1) & np.isfinite(results.modelled_tokens_per_s)
        categorical = results.faults - over_memory - too_slow
        assert np.array_equal((categorical > 0)[placed], (distances.broken_settings > 0)[placed])
        assert np.all(over_memory[results.status == OOM])
        assert np.all(too_slow[results.status == TOO_SLOW])
        assert np.all(distances.broken_settings[~placed] == 0)
        placed_rows += int(placed.sum())
    assert placed_rows > 250


def test_memory_and_floor_ratios_by_hand():
    scenario = Scenario.from_dict(
        {
            "cluster": {"gpu": "l4", "count": 1},
            "jobs": [
                {
                    "id": "chat",
                    "model": "llama-3.1-8b",
                    "kind": "serve",
                    "priority": 1,
                    "seq_len": 4096,
                    "batch_size": 64,
                    "min_tokens_per_s": 1e6,
                }
            ],
        }
    )
    precision = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "int4", "lm_head": "fp32"}
    plan = {"jobs": [{"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": precision}]}
    scored = score_batch([solved_scenario(scenario)], [plan])
    distances = row_distances(scored.table, scored.rows, scored.results)
    # 64 sequences × 4096 tokens × 128 KiB of bf16 KV cache alone are 34.4 GB, over the L4's 23,034 MiB
    need = scored.results.memory_per_gpu_bytes[0]
    assert need > 64 * 4096 * 131072
    assert distances.memory_ratio[0] == pytest.approx(need / (23_034 * 2**20), rel=1e-3)
    # what it would make if it ran, over the floor
    assert distances.floor_ratio[0] == pytest.approx(scored.results.modelled_tokens_per_s[0] / 1e6)
    assert 0 < distances.floor_ratio[0] < 1
    assert distances.broken_settings[0] == 1  # the int4 norm diverges; fp32 lm_head is merely slow
    assert scored.results.status[0] == OOM  # the status names one fault; the distances measure them all
