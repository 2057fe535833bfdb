"""What a held-out scenario shows that training never did: its GPU, a job's model, or both.

Training scenarios (``split="train"``) never use ``HELD_OUT_GPUS`` or ``HELD_OUT_MODELS``
(``fleet_rl.scenario_generator``); every held-out scenario uses at least one of them. A policy that sizes
jobs from the prompt's figures should do as well on an unseen GPU as on an unseen model; one that learnt
names by heart fails where the unseen part decides the plan. ``unseen_kind`` labels each scenario so that
the held-out score can be split by it (``fleet_rl.training.heldout.summarise``'s ``per_unseen``).
"""

from __future__ import annotations

from typing import Literal

from fleet_rl.scenario import Scenario
from fleet_rl.scenario_generator import HELD_OUT_GPUS, HELD_OUT_MODELS

__all__ = ["UNSEEN_KINDS", "unseen_kind"]

UnseenKind = Literal["gpu", "model", "both", "none"]
UNSEEN_KINDS: tuple[str, ...] = ("gpu", "model", "both", "none")  # "none": a training-like scenario


def unseen_kind(scenario: Scenario | str) -> UnseenKind:
    """``"gpu"`` (the cluster's GPU is held out), ``"model"`` (some job's model is), ``"both"`` or ``"none"``;
    ``scenario`` is a ``Scenario`` or its JSON (the dataset column)."""
    if not isinstance(scenario, Scenario):
        scenario = Scenario.from_json(scenario)
    gpu = scenario.cluster.gpu in HELD_OUT_GPUS
    model = any(job.model in HELD_OUT_MODELS for job in scenario.jobs)
    return "both" if gpu and model else "gpu" if gpu else "model" if model else "none"
