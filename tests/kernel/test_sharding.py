"""Data-parallel sharding (the plan's ``sharding``): ZeRO's memory arithmetic, its communication cost, and
what a wrong use gets."""

from __future__ import annotations

import pytest
from conftest import ALL_BF16, job_plan, one_job

from fleet_rl.catalog import MODELS
from fleet_rl.kernel import evaluate
from fleet_rl.plan_schema import plan_from_object

LLAMA_8B = MODELS["llama-3.1-8b"]
SETTING = {"gpus": 8, "tp": 1, "micro_batch_size": 1, "activation_checkpointing": True}


def train_8b(sharding: str, **overrides):
    scenario = one_job("h100-sxm", "llama-3.1-8b", "train", count=8, seq_len=4096, batch_size=32)
    return evaluate(scenario, job_plan(**{**SETTING, **overrides}, sharding=sharding)).jobs[0]


def test_memory_follows_zero_stage_arithmetic():
    """ZeRO §5.1: P_os+g keeps the 2 B/param of weights and shards 14; P_os+g+p shards all 16 and gathers
    two layers of bf16 weights."""
    n, d, layers = LLAMA_8B.num_params, 8, LLAMA_8B.num_layers
    none, optimizer, full = (train_8b(s) for s in ("none", "optimizer", "full"))
    assert none.memory_per_gpu_gb - optimizer.memory_per_gpu_gb == pytest.approx(14 * n * (1 - 1 / d) / 1e9)
    full_saving = 16 * n * (1 - 1 / d) - 2 * 2 * n / layers
    assert none.memory_per_gpu_gb - full.memory_per_gpu_gb == pytest.approx(full_saving / 1e9)


def test_full_sharding_is_how_an_8b_full_fine_tune_fits_on_80gb_gpus():
    assert train_8b("none").status == "oom"  # 16 B/param × 8.03 B = 128 GB per replica
    full = train_8b("full")
    assert full.status == "ok" and full.memory_per_gpu_gb < 40


def test_sharding_is_paid_for_in_communication():
    """Where every variant fits, the less a replica holds the more it communicates."""
    scenario = one_job("h100-sxm", "gpt2", "train", count=8, seq_len=1024, batch_size=64)
    tokens = {
        s: evaluate(scenario, job_plan(gpus=8, micro_batch_size=2, sharding=s)).jobs[0].tokens_per_s
        for s in ("none", "optimizer", "full")
    }
    assert tokens["full"] < tokens["optimizer"] < tokens["none"]


def test_one_replica_has_nothing_to_shard():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "lora", count=8, seq_len=2048, batch_size=8)
    results = [evaluate(scenario, job_plan(gpus=2, tp=2, sharding=s)).jobs[0] for s in ("none", "full")]
    assert results[0] == results[1]


def test_sharding_a_serving_job_is_unsupported_with_a_precise_reason():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "serve", count=2, seq_len=1024, batch_size=8)
    evaluation = evaluate(scenario, job_plan(gpus=2, sharding="full"))
    assert evaluation.valid and evaluation.jobs[0].status == "unsupported"
    assert any("sharding 'full' is a training setting" in reason for reason in evaluation.reasons)
    assert evaluation.score == 0.0


def test_the_schema_takes_three_shardings_and_defaults_to_none():
    plan = {"jobs": [{"id": "a", "gpus": 1, "tensor_parallel": 1, "precision": ALL_BF16}]}
    assert plan_from_object(plan).jobs[0].sharding == "none"
    for sharding in ("none", "optimizer", "full"):
        plan["jobs"][0]["sharding"] = sharding
        assert plan_from_object(plan).jobs[0].sharding == sharding
    plan["jobs"][0]["sharding"] = "zero3"
    with pytest.raises(Exception, match="sharding"):
        plan_from_object(plan)
