"""The learning benchmark's scenario fingerprint: one hash of what its held-out numbers are measured on.

    python -m benchmarks.learning --fingerprint --config configs/smollm2_cpu.yaml   # today's, last line

A learning result (``benchmarks/results/learning_*.json``) compares with today's code only if its held-out
scenarios would be asked and scored the same way today. ``scenario_fingerprint(rows)`` hashes, for each
held-out row (``benchmarks.learning.evaluate.eval_rows``: the rows ``fleet_rl.training.heldout`` answers,
in the preset's prompt style):

- the prompt messages exactly as the policy sees them, the scenario JSON, its task and generator seed, and a
  multi-agent row's agent and given parts;
- the optimum: the solved optimal objective (12 significant digits) and the optimal plan (sorted keys);
- the ``fleet_reward`` of a fixed panel of answers (``PANEL``), rounded to 9 decimals: the baselines
  ``even_bf16``, ``heuristic``, ``random_split``, ``random_feasible`` and ``random`` (``fleet_rl.baselines``,
  seed 0), the optimum, giving up (``{"jobs": []}``) and every job on all the GPUs (over-allocated unless
  the scenario has one job).

So it moves when the prompts, the tiers, the physics, the optima or the reward change: a stored result
whose ``scenario_fingerprint`` differs from today's was measured on another benchmark. It is the sha256 of
those records as canonical JSON, cut to ``DIGITS`` hex digits. It is separate from the learning result's
``fingerprint`` (the config, flags and evaluation settings that ``--reuse`` compares).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from fleet_rl.baselines import BASELINES, even_bf16
from fleet_rl.prompts import format_answer
from fleet_rl.scenario import Scenario
from fleet_rl.solved_scenarios import solved_scenario
from fleet_rl.training.dataset import planner_answer
from rewards import fleet_reward

__all__ = ["DIGITS", "PANEL", "REWARD_DECIMALS", "panel_answers", "scenario_fingerprint"]

DIGITS = 16  # hex digits of the sha256 kept: 64 bits, plenty to tell two benchmarks apart
REWARD_DECIMALS = 9
PANEL_SEED = 0


def _give_up(scenario: Scenario, seed: int = 0) -> dict:
    return {"jobs": []}


def _all_gpus(scenario: Scenario, seed: int = 0) -> dict:
    """``even_bf16``'s formats with every job on every GPU at tensor parallelism 1."""
    parts = even_bf16(scenario, seed)["jobs"]
    return {"jobs": [part | {"gpus": scenario.cluster.count, "tensor_parallel": 1} for part in parts]}


PANEL = {
    **{
        name: BASELINES[name]
        for name in ("even_bf16", "heuristic", "random_split", "random_feasible", "random")
    },
    "optimal": BASELINES["optimal"],
    "give_up": _give_up,
    "all_gpus": _all_gpus,
}
"""The fixed panel of planners whose rewards the fingerprint covers, each ``fn(scenario, seed) -> plan``."""


def panel_answers(row: dict) -> dict[str, str]:
    """Each panel planner's answer to one held-out row, as the policy would write it (seed ``PANEL_SEED``;
    a multi-agent row gets the agent's own part, as ``planner_answer`` cuts it)."""
    fixed = row | {"seed": PANEL_SEED}
    return {name: format_answer(planner_answer(planner, fixed)) for name, planner in PANEL.items()}


def scenario_fingerprint(rows: Sequence[dict]) -> str:
    """The sha256 (first ``DIGITS`` hex digits) of the held-out rows' prompts, optima and panel rewards
    (see the module docstring)."""
    answers = [panel_answers(row) for row in rows]
    columns = {"agent": [row["agent"] for row in rows], "given_plan": [row["given_plan"] for row in rows]}
    scenarios = [row["scenario"] for row in rows]
    rewards = {
        name: fleet_reward([answer[name] for answer in answers], scenarios, **columns) for name in PANEL
    }
    records = []
    for k, row in enumerate(rows):
        solved = solved_scenario(row["scenario"])
        records.append(
            {
                "prompt": row["prompt"],
                "scenario": row["scenario"],
                "task": row["task"],
                "seed": row["seed"],
                "agent": row["agent"],
                "given_plan": row["given_plan"],
                "optimal_objective": f"{solved.optimal_objective:.12g}",
                "optimal_plan": solved.optimal_plan,
                "panel_rewards": {
                    name: round(float(values[k]), REWARD_DECIMALS) + 0.0  # + 0.0: no -0.0
                    for name, values in rewards.items()
                },
            }
        )
    text = json.dumps(records, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGITS]
