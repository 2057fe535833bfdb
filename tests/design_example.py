"""The DESIGN.md §3 example scenario, shared by the reward tests (imported as ``tests.design_example``)."""

from __future__ import annotations

from fleet_rl import Scenario

DESIGN_EXAMPLE = {
    "cluster": {"gpu": "h100-sxm", "count": 8},
    "jobs": [
        {
            "id": "chat",
            "model": "llama-3.1-8b",
            "kind": "serve",
            "priority": 2,
            "seq_len": 4096,
            "batch_size": 32,
        },
        {
            "id": "tune",
            "model": "mistral-7b",
            "kind": "lora",
            "priority": 1,
            "seq_len": 2048,
            "batch_size": 16,
        },
    ],
}
SCENARIO = Scenario.from_dict(DESIGN_EXAMPLE)
SCENARIO_JSON = SCENARIO.to_json()
