"""A two-job scenario for the plan-level tests (placement, repairs): a 70B serve job and a 7B train job on
eight H100s, and the answer the SmolLM2 runs settle on (the first job alone, every GPU, tp 1, bf16)."""

from __future__ import annotations

import json

from fleet_rl.scenario import Scenario

BF16 = {"embedding": "bf16", "attention": "bf16", "mlp": "bf16", "norm": "bf16", "lm_head": "bf16"}
SCENARIO = Scenario.from_dict(
    {
        "cluster": {"gpu": "h100-sxm", "count": 8},
        "jobs": [
            {"id": "chat", "model": "llama-3.1-70b", "kind": "serve", "priority": 2, "seq_len": 2048,
             "batch_size": 8},
            {"id": "tune", "model": "mistral-7b", "kind": "train", "priority": 1, "seq_len": 1024,
             "batch_size": 8},
        ],
    }
)  # fmt: skip
TEMPLATE_PLAN = json.dumps(
    {"jobs": [{"id": "chat", "gpus": 8, "tensor_parallel": 1, "precision": BF16, "kv_cache": "bf16"}]},
    separators=(",", ":"),
)
