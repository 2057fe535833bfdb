"""The verdict on one completion: its training reward and the kernel's feedback, for an environment step.

``verdict(request, completion)`` scores the completion through the training reward's own path, the two
halves of ``rewards.fleet_reward``: one scoring pass (``score_completions``: parse, merge a multi-agent
answer with the given parts, batched kernel, IRD) and its reward (``rewards_from_scores``), with the parse
error, IRD rule and % of optimum of the columns it hands TRL's completions table (``completion_columns``).
The kernel's per-job results of that same pass (``evaluations_from``: no second simulation) add what a
reviser needs: each job's status, memory need against capacity, throughput and the reasons.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fleet_rl.kernel.batch_scoring import evaluations_from
from fleet_rl.kernel.solver import SolvedScenario
from fleet_rl.scenario import Scenario
from rewards.fleet_reward import completion_columns, rewards_from_scores
from rewards.scoring import score_completions

__all__ = ["EpisodeRequest", "Verdict", "verdict"]


@dataclass(frozen=True)
class EpisodeRequest:
    """What an episode asks for: the scenario (solved), and for a multi-agent request the agent's job and
    the other jobs' given parts (plan JSON); ``agent == ""`` for a whole plan."""

    scenario: Scenario
    solved: SolvedScenario
    agent: str = ""
    given_plan: str = ""


@dataclass(frozen=True)
class Verdict:
    reward: float  # fleet_reward, in [0, 1]
    percent_of_optimum: float
    parse_error: str  # "" when a plan was read
    parse_detail: str  # the parse error explained ("" when a plan was read)
    degenerate: str  # the IRD rule that fired, "" if none
    valid: bool | None  # kernel-valid (None when no plan was read)
    jobs: list[dict]  # JobFeedback fields, scenario order
    reasons: list[str]

    def text(self, turn: int, max_turns: int) -> str:
        """The verdict as a few lines a model reads before revising its plan."""
        score = f"reward {self.reward:.3f}, {self.percent_of_optimum:.1f} % of optimum"
        lines = [f"Turn {turn} of {max_turns}: {score}."]
        if self.parse_error:
            lines.append(f"No plan could be read from the answer ({self.parse_error}): {self.parse_detail}")
        if self.degenerate:
            lines.append(f"Degenerate answer ({self.degenerate}): it earns the minimum.")
        for job in self.jobs:
            line = f"- {job['id']}: {job['status']}"
            if job["gpus"]:
                line += (
                    f" on {job['gpus']} GPU(s), TP {job['tensor_parallel']}, "
                    f"{job['memory_per_gpu_gb']:.1f} of {job['memory_capacity_gb']:.1f} GB per GPU"
                )
            if job["status"] == "ok":
                line += (
                    f", {job['tokens_per_s']:.0f} tokens/s, quality loss {100 * job['quality_loss']:.2f} %"
                )
            lines.append(line)
        lines += [f"Reason: {reason}" for reason in self.reasons]
        return "\n".join(lines)


def verdict(request: EpisodeRequest, completion: str) -> Verdict:
    """Score ``completion`` for ``request`` exactly as training does, with the kernel's feedback."""
    scores = score_completions(
        [completion], [request.solved], agent=[request.agent], given_plan=[request.given_plan]
    )
    reward = rewards_from_scores(scores)[0]
    columns = completion_columns(scores)
    jobs: list[dict] = []
    reasons: list[str] = []
    valid = None
    if scores.scored is not None:  # the completion parsed to a plan
        evaluation = evaluations_from([request.solved], scores.scored)[0]
        valid = evaluation.valid
        reasons = list(evaluation.reasons)
        for job in evaluation.jobs:
            fields = {name: getattr(job, name) for name in _JOB_FIELDS}
            fields["memory_headroom_gb"] = round(job.memory_capacity_gb - job.memory_per_gpu_gb, 3)
            jobs.append(fields)
    return Verdict(
        reward=float(reward),
        percent_of_optimum=float(columns["percent_of_optimum"][0]),
        parse_error=columns["parse_error"][0],
        parse_detail=scores.parsed[0].detail,
        degenerate=columns["ird"][0],
        valid=valid,
        jobs=jobs,
        reasons=reasons,
    )


_JOB_FIELDS = (
    "id",
    "status",
    "gpus",
    "tensor_parallel",
    "memory_per_gpu_gb",
    "memory_capacity_gb",
    "tokens_per_s",
    "quality_loss",
    "power_w",
    "value",
)


def given_plan_json(given: dict | None) -> str:
    """A multi-agent request's given parts as the compact JSON the dataset column holds ('' for none)."""
    return json.dumps(given, separators=(",", ":")) if given else ""
