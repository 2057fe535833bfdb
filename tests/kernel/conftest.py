"""Shared helpers for kernel tests: small scenarios and plans written out literally."""

from __future__ import annotations

import pytest

from fleet_rl import Scenario
from tests.design_example import SCENARIO

ALL_BF16 = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "bf16", "lm_head": "bf16"}


def one_job(
    gpu: str, model: str, kind: str, count: int = 1, seq_len: int = 4096, batch_size: int = 1, **extra
) -> Scenario:
    job = {
        "id": "job",
        "model": model,
        "kind": kind,
        "priority": 1.0,
        "seq_len": seq_len,
        "batch_size": batch_size,
        **extra,
    }
    return Scenario.from_dict({"cluster": {"gpu": gpu, "count": count}, "jobs": [job]})


def job_plan(gpus: int = 1, tp: int = 1, precision: dict | None = None, **extra) -> dict:
    plan = {
        "id": "job",
        "gpus": gpus,
        "tensor_parallel": tp,
        "precision": dict(precision or ALL_BF16),
        **extra,
    }
    return {"jobs": [plan]}


@pytest.fixture
def two_job_scenario() -> Scenario:
    return SCENARIO  # the DESIGN.md §3 example
