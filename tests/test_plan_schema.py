"""The plan schema: strict decoding and the exported JSON Schema."""

from __future__ import annotations

import msgspec
import pytest

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.plan_schema import PLAN_JSON_SCHEMA, plan_from_json, plan_from_object, plan_to_dict

PLAN = {
    "jobs": [
        {
            "id": "chat",
            "gpus": 2,
            "tensor_parallel": 2,
            "precision": {
                "embedding": "bf16",
                "attention": "bf16",
                "mlp": "fp8",
                "norm": "fp32",
                "lm_head": "bf16",
            },
            "kv_cache": "fp8",
        },
        {
            "id": "tune",
            "gpus": 6,
            "tensor_parallel": 1,
            "precision": {
                "embedding": "bf16",
                "attention": "int4",
                "mlp": "int4",
                "norm": "fp32",
                "lm_head": "bf16",
            },
            "micro_batch_size": 2,
            "activation_checkpointing": True,
        },
    ]
}


def test_the_design_example_round_trips():
    plan = plan_from_object(PLAN)
    assert plan_to_dict(plan) == PLAN
    assert plan_from_json(msgspec.json.encode(PLAN)) == plan


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("gpus",), "2"),  # strings are not numbers
        (("gpus",), 2.0),  # floats are not ints
        (("activation_checkpointing",), 1),  # ints are not bools
        (("tensor_parallel",), 3),  # TP in {1, 2, 4, 8}
        (("micro_batch_size",), 3),  # powers of two up to 64
        (("precision", "mlp"), "BF16"),  # enums are lower-case
        (("precision", "mlp"), "fp4"),  # unknown format
        (("typo",), 1),  # unknown keys are rejected
    ],
)
def test_strict_validation_rejects(path, value):
    job = {**PLAN["jobs"][1], "precision": dict(PLAN["jobs"][1]["precision"])}
    target = job
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(msgspec.ValidationError):
        plan_from_object({"jobs": [job]})


def test_json_schema_names_every_group_and_format():
    definitions = PLAN_JSON_SCHEMA["$defs"]
    precision_map = definitions["PrecisionMap"]
    assert precision_map["required"] == list(MODULE_GROUPS)
    assert sorted(precision_map["properties"]["mlp"]["enum"]) == sorted(PRECISIONS)
    job = definitions["JobPlan"]
    assert set(job["required"]) == {"id", "gpus", "tensor_parallel", "precision"}
