"""The OpenEnv wire types of the fleet environment: what a client sends and what it gets back.

- ``FleetAction``: one completion, as the policy wrote it (text holding one JSON plan; reasoning and prose
  around it are allowed, exactly as in training). It is scored by the training reward path.
- ``FleetObservation``: after ``reset``, the request (chat messages, scenario, agent); after ``step``, the
  verdict on the plan: its training reward, the kernel's per-job feedback and reasons, and a text summary a
  model can read to revise the plan in the next turn.
- ``FleetState``: the episode so far (task, seed, mode, every plan's reward), for ``state()``.

Pydantic models, as openenv's server and client expect; ``extra="forbid"`` on the action (openenv's
default) so a misspelt field is a validation error rather than silently ignored.
"""

from __future__ import annotations

from typing import Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field

from rewards.parsing import MAX_COMPLETION_CHARS

__all__ = ["MODES", "FleetAction", "FleetObservation", "FleetState", "JobFeedback"]

MODES: tuple[str, ...] = ("single", "refine")
Mode = Literal["single", "refine"]


class FleetAction(Action):
    """One answer: the completion text (a plan as JSON, optionally in a ```json fence after reasoning).

    ``final`` ends a refinement episode with this plan (ignored in single-step mode, where every plan is
    final). Longer than ``MAX_COMPLETION_CHARS`` is refused before scoring (the reward path would score it
    0 as ``too_large``; refusing it saves the server from parsing it)."""

    plan: str = Field(
        ..., max_length=MAX_COMPLETION_CHARS, description="the completion: text holding one JSON plan"
    )
    final: bool = Field(default=False, description="refinement mode: end the episode with this plan")


class JobFeedback(BaseModel):
    """The kernel's verdict on one job under the submitted plan (``fleet_rl.kernel.JobResult`` plus the
    memory headroom a reviser reads first)."""

    id: str
    status: str  # one of fleet_rl.kernel.constants.STATUSES (ok, oom, ..., too_slow)
    gpus: int
    tensor_parallel: int
    memory_per_gpu_gb: float
    memory_capacity_gb: float
    memory_headroom_gb: float  # capacity - need per GPU; negative when it does not fit
    tokens_per_s: float
    quality_loss: float
    power_w: float
    value: float


class FleetObservation(Observation):
    """What the environment shows. ``reward`` and ``done`` (inherited) are the step's; the fields below
    are the request (set on every observation) and the verdict (after a step; defaults after reset)."""

    task: str = ""
    seed: int = 0
    split: str = "train"
    mode: str = "single"
    turn: int = Field(default=0, description="plans submitted so far in this episode")
    max_turns: int = 1
    messages: list[dict[str, str]] = Field(default_factory=list, description="the chat prompt: system, user")
    prompt: str = Field(default="", description="the user message alone")
    scenario: str = Field(default="", description="the scenario as JSON (the dataset column)")
    agent: str = Field(default="", description="multi-agent: the job whose part is asked for; '' otherwise")
    given_plan: str = Field(default="", description="multi-agent: the other jobs' fixed parts, as JSON")
    plan_reward: float | None = Field(default=None, description="the training reward of this plan, in [0, 1]")
    percent_of_optimum: float | None = None
    parse_error: str = Field(
        default="", description="why no plan was read from the completion ('' if one was)"
    )
    degenerate: str = Field(default="", description="the IRD rule the plan broke ('' if none)")
    valid: bool | None = None
    jobs: list[JobFeedback] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list, description="the kernel's 'code: text' reasons")
    feedback: str = Field(default="", description="the verdict as text, for the next turn's prompt")


class FleetState(State):
    """The episode: its request and every plan's training reward so far."""

    task: str = ""
    seed: int = 0
    split: str = "train"
    mode: str = "single"
    max_turns: int = 1
    turn_cost: float = 0.0
    agent: str = ""
    done: bool = False
    plan_rewards: list[float] = Field(default_factory=list)
    episode_reward: float | None = Field(default=None, description="set when the episode is done")
