"""fleet_rl.replica_fit: the "Fits" figures of the sized prompt are the kernel's memory verdict, exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import TASKS, make_scenario
from fleet_rl.kernel import evaluate
from fleet_rl.replica_fit import ReplicaFit, _part, fit_part, replica_fits
from fleet_rl.scenario import Scenario


def _status(scenario, job, fmt, tensor_parallel):
    half = "bf16" if scenario.gpu.supports("bf16") else "fp16"
    part = _part(job, fmt, tensor_parallel, half, scenario.gpu.supports("fp8"))
    evaluation = evaluate(scenario, {"jobs": [part]})
    return next(result.status for result in evaluation.jobs if result.id == job.id)


def _dividing(scenario, job):
    heads = (job.model_spec.num_attention_heads, job.model_spec.num_key_value_heads)
    return [tp for tp in (1, 2, 4, 8) if tp <= scenario.cluster.count and all(h % tp == 0 for h in heads)]


@pytest.mark.parametrize("task", ["easy", "medium", "hard"])
def test_the_stated_tensor_parallelism_fits_and_every_smaller_one_does_not(task):
    for seed in range(6):
        scenario = make_scenario(task, seed, "eval")
        fits = replica_fits(scenario)
        assert list(fits) == list(scenario.job_ids)
        for job in scenario.jobs:
            for fit in fits[job.id]:
                tps = _dividing(scenario, job)
                smaller = [tp for tp in tps if fit.tensor_parallel is None or tp < fit.tensor_parallel]
                for tp in smaller:
                    assert _status(scenario, job, fit.fmt, tp) in ("oom", "unstable"), (job.id, fit, tp)
                if fit.tensor_parallel is not None:
                    assert _status(scenario, job, fit.fmt, fit.tensor_parallel) in ("ok", "too_slow")


def test_a_fits_entry_as_a_part_holds_one_replica_and_an_entry_without_one_has_no_part():
    scenario = make_scenario("medium", 3, "eval")
    for job in scenario.jobs:
        for fit in replica_fits(scenario)[job.id]:
            if fit.tensor_parallel is None:
                with pytest.raises(ValueError, match="fits no replica"):
                    fit_part(job, fit, scenario.gpu)
                continue
            part = fit_part(job, fit, scenario.gpu)
            assert part["gpus"] == part["tensor_parallel"] == fit.tensor_parallel
            assert evaluate(scenario, {"jobs": [part]}).jobs[scenario.job_ids.index(job.id)].status in (
                "ok",
                "too_slow",
            )


def test_formats_follow_the_job_kind_and_the_gpu():
    fp8_gpu = Scenario.from_dict(
        {"cluster": {"gpu": "h100-sxm", "count": 8},
         "jobs": [{"id": "t", "model": "llama-3.1-8b", "kind": "train", "priority": 1, "seq_len": 1024,
                   "batch_size": 8},
                  {"id": "s", "model": "llama-3.1-8b", "kind": "serve", "priority": 1, "seq_len": 1024,
                   "batch_size": 8}]}
    )  # fmt: skip
    fits = replica_fits(fp8_gpu)
    assert [fit.fmt for fit in fits["t"]] == ["bf16", "fp8"]  # trained weights are never int8/int4
    assert [fit.fmt for fit in fits["s"]] == ["bf16", "fp8", "int4"]  # int8 holds what fp8 does
    no_fp8 = Scenario.from_dict(fp8_gpu.to_dict() | {"cluster": {"gpu": "a100-80gb", "count": 8}})
    assert [fit.fmt for fit in replica_fits(no_fp8)["s"]] == ["bf16", "int8", "int4"]
    assert fits["s"][0] == ReplicaFit("bf16", 1)  # an 8B model serving 8 x 1k tokens fits one H100


def test_a_job_no_tensor_parallelism_holds_says_oom():
    scenario = Scenario.from_dict(
        {"cluster": {"gpu": "rtx-4090", "count": 2},
         "jobs": [{"id": "big", "model": "llama-3.1-70b", "kind": "train", "priority": 1, "seq_len": 2048,
                   "batch_size": 8}]}
    )  # fmt: skip
    assert replica_fits(scenario)["big"] == [ReplicaFit("bf16", None, "oom"), ReplicaFit("fp8", None, "oom")]


@settings(max_examples=30, deadline=None)
@given(task=st.sampled_from(TASKS), seed=st.integers(0, 2**31 - 1), split=st.sampled_from(["train", "eval"]))
def test_every_drawn_scenario_gets_a_verdict_per_job(task, seed, split):
    scenario = make_scenario(task, seed, split)
    fits = replica_fits(scenario)
    for job in scenario.jobs:
        assert fits[job.id]
        assert all(fit.tensor_parallel or fit.reason in ("oom", "quality") for fit in fits[job.id])


def _fits_without_checkpointing(scenario, job, fit, micro_batch):
    half = "bf16" if scenario.gpu.supports("bf16") else "fp16"
    part = _part(job, fit.fmt, fit.tensor_parallel, half, scenario.gpu.supports("fp8"))
    part |= {"micro_batch_size": micro_batch, "activation_checkpointing": False}
    status = evaluate(scenario, {"jobs": [part]}).jobs[scenario.job_ids.index(job.id)].status
    return status in ("ok", "too_slow")


@pytest.mark.parametrize("task", ["easy", "medium", "hard"])
def test_a_training_fit_names_the_largest_micro_batch_that_fits_without_checkpointing(task):
    """Issue #68: the prompt says whether a training replica needs checkpointing at its stated size."""
    seen = set()
    for seed in range(8):
        scenario = make_scenario(task, seed, "eval")
        for job in scenario.jobs:
            for fit in replica_fits(scenario)[job.id]:
                if job.kind == "serve" or fit.tensor_parallel is None:
                    assert fit.micro_batch_size is None
                    continue
                if fit.micro_batch_size is None:  # only with checkpointing: micro-batch 1 without it crashes
                    assert not _fits_without_checkpointing(scenario, job, fit, 1)
                    seen.add("checkpointing")
                    continue
                assert _fits_without_checkpointing(scenario, job, fit, fit.micro_batch_size)
                sizes = (2, 4, 8, 16, 32, 64)
                larger = [size for size in sizes if fit.micro_batch_size < size <= job.batch_size]
                if larger:  # the next size up crashes, unless the job's batch is already whole
                    assert not _fits_without_checkpointing(scenario, job, fit, larger[0])
                seen.add("without")
    assert seen == {"checkpointing", "without"} or task == "easy"
