"""fleet_rl.floor_fit: the floor figures of the sized_batching_floors prompt are the kernel's
throughput verdict on the stated part, exactly, and the heuristic's split rests on them."""

from __future__ import annotations

import pytest

from fleet_rl import make_scenario
from fleet_rl.floor_fit import _stated_part, floor_gpus
from fleet_rl.heuristic import heuristic
from fleet_rl.replica_fit import part_status, replica_fits
from fleet_rl.solved_scenarios import solved_scenario


def _floor_jobs(task, seeds):
    for seed in seeds:
        solved = solved_scenario(make_scenario(task, seed, "eval"))
        fits = replica_fits(solved)
        for job in solved.scenario.jobs:
            if job.min_tokens_per_s is not None:
                yield solved, job, fits[job.id]


@pytest.mark.parametrize("task", ["easy", "medium", "hard"])
def test_the_stated_gpus_meet_the_floor_and_every_fewer_replica_count_does_not(task):
    checked = 0
    for solved, job, fits in _floor_jobs(task, range(12)):
        for fit, gpus in zip(fits, floor_gpus(solved, job, fits), strict=True):
            if fit.tensor_parallel is None:
                assert gpus is None  # no replica fits: no count of them can meet the floor
                continue
            part = _stated_part(job, fit, solved)
            counts = range(fit.tensor_parallel, solved.gpu_count + 1, fit.tensor_parallel)
            fewer = [count for count in counts if gpus is None or count < gpus]
            for count in fewer:
                assert part_status(solved, part | {"gpus": count}) == "too_slow", (job.id, fit, count)
            if gpus is not None:
                assert part_status(solved, part | {"gpus": gpus}) == "ok"
                checked += 1
    assert checked > 5


def test_the_stated_part_batches_as_the_fits_entry_says():
    for solved, job, fits in _floor_jobs("medium", range(12)):
        for fit in fits:
            if fit.tensor_parallel is None or job.kind == "serve":
                continue
            part = _stated_part(job, fit, solved)
            stated = (fit.micro_batch_size, False) if fit.micro_batch_size else (1, True)
            assert (part["micro_batch_size"], part["activation_checkpointing"]) == stated
            assert part["gpus"] == part["tensor_parallel"] == fit.tensor_parallel


def test_a_job_without_a_floor_has_no_floor_figures():
    solved = solved_scenario(make_scenario("medium", 3, "eval"))
    job = next(job for job in solved.scenario.jobs if job.min_tokens_per_s is None)
    with pytest.raises(ValueError, match="no min_tokens_per_s"):
        floor_gpus(solved, job, replica_fits(solved)[job.id])


def test_the_heuristic_gives_a_placed_floor_job_at_least_the_stated_gpus_of_its_format():
    """Issue #68: the heuristic's split gives a job with a floor the fewest replicas that meet it; the prompt
    now states that count, so an imitator can read the lower bound of the heuristic's split."""
    compared = 0
    for task in ("easy", "medium"):
        for solved, job, fits in _floor_jobs(task, range(40)):
            part = next(p for p in heuristic(solved.scenario)["jobs"] if p["id"] == job.id)
            if part["gpus"] == 0:
                continue
            stated = dict(zip((fit.fmt for fit in fits), floor_gpus(solved, job, fits), strict=True))
            gpus = stated[part["precision"]["mlp"] if part["precision"]["mlp"] in stated else "bf16"]
            if gpus is not None:
                compared += 1
                assert part["gpus"] >= gpus, (job.id, part, stated)
    assert compared > 20
