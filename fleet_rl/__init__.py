"""Libratio Fleet: GRPO post-training of an LLM that plans GPU-cluster configurations.

Public API (DESIGN.md §3):

    from fleet_rl import Scenario, make_scenario, TASKS
    from fleet_rl.kernel import evaluate, evaluate_batch, solve
    from fleet_rl.catalog import GPUS, MODELS
"""

from fleet_rl.scenario import Cluster, Job, Scenario
from fleet_rl.scenario_generator import TASKS, make_scenario

__all__ = ["TASKS", "Cluster", "Job", "Scenario", "make_scenario"]
