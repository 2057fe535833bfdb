"""fleet_rl.training.setting_variety: distinct settings per job kind, the conditioning count."""

from __future__ import annotations

import json

import pytest

from fleet_rl.scenario import Scenario
from fleet_rl.training.setting_variety import distinct_settings_per_kind

BF16 = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "bf16", "lm_head": "bf16"}
FP8 = BF16 | {"attention": "fp8", "mlp": "fp8"}


def _scenario(gpu: str, count: int) -> Scenario:
    return Scenario.from_dict(
        {
            "cluster": {"gpu": gpu, "count": count},
            "jobs": [
                {"id": "chat", "model": "llama-3.1-8b", "kind": "serve", "priority": 1, "seq_len": 2048,
                 "batch_size": 8},
                {"id": "tune", "model": "mistral-7b", "kind": "train", "priority": 1, "seq_len": 1024,
                 "batch_size": 8},
            ],
        }
    )  # fmt: skip


def _answer(*jobs: dict) -> str:
    return "```json\n" + json.dumps({"jobs": list(jobs)}) + "\n```"


def test_a_template_counts_one_setting_per_kind_whatever_the_gpu_counts():
    scenarios = [_scenario("h100-sxm", 8), _scenario("h100-sxm", 4), _scenario("a100-80gb", 2)]
    answers = [
        _answer({"id": "chat", "gpus": n, "tensor_parallel": 1, "precision": BF16},
                {"id": "tune", "gpus": n, "tensor_parallel": 1, "precision": BF16})
        for n in (4, 2, 1)
    ]  # fmt: skip
    assert distinct_settings_per_kind(scenarios, answers) == {"serve": 1, "train": 1}


def test_tensor_parallel_formats_and_the_serving_kv_cache_each_make_a_new_setting():
    scenarios = [_scenario("h100-sxm", 8)] * 4
    answers = [
        _answer({"id": "chat", "gpus": 2, "tensor_parallel": 1, "precision": BF16},
                {"id": "tune", "gpus": 2, "tensor_parallel": 1, "precision": BF16, "kv_cache": "fp8"}),
        _answer({"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": BF16},
                {"id": "tune", "gpus": 2, "tensor_parallel": 1, "precision": BF16, "kv_cache": "int8"}),
        _answer({"id": "chat", "gpus": 2, "tensor_parallel": 1, "precision": FP8},
                {"id": "tune", "gpus": 2, "tensor_parallel": 1, "precision": FP8}),
        _answer({"id": "chat", "gpus": 2, "tensor_parallel": 1, "precision": BF16, "kv_cache": "fp8"}),
    ]  # fmt: skip
    # serve: (1, bf16), (2, bf16), (1, fp8), (1, bf16, kv fp8) = 4
    # train ignores kv_cache: (1, bf16), (1, fp8) = 2
    assert distinct_settings_per_kind(scenarios, answers) == {"serve": 4, "train": 2}


def test_unplaced_jobs_unknown_ids_and_unreadable_answers_add_nothing():
    scenarios = [_scenario("h100-sxm", 8)] * 4
    answers = [
        _answer({"id": "chat", "gpus": 0, "tensor_parallel": 2, "precision": FP8},
                {"id": "ghost", "gpus": 4, "tensor_parallel": 4, "precision": BF16}),
        "I would give every job eight GPUs.",
        '{"jobs": [{"id": "chat", "gpus": 1',  # truncated
        [{"role": "assistant", "content": _answer({"id": "tune", "gpus": 3, "tensor_parallel": 1,
                                                   "precision": BF16})}],  # conversational
    ]  # fmt: skip
    assert distinct_settings_per_kind(scenarios, answers) == {"serve": 0, "train": 1}


def test_scenarios_may_be_the_dataset_columns_json_and_lengths_must_match():
    scenario = _scenario("l4", 2)
    answer = _answer({"id": "chat", "gpus": 1, "tensor_parallel": 1, "precision": BF16})
    assert distinct_settings_per_kind([scenario.to_json()], [answer]) == {"serve": 1, "train": 0}
    with pytest.raises(ValueError, match="2 scenarios but 1 completions"):
        distinct_settings_per_kind([scenario, scenario], [answer])
