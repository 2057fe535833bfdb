"""Training and warm-start datasets drawn from the scenario generator; deterministic and held-out clean.

``grpo_dataset(...)`` is a ``datasets.Dataset`` with the columns TRL's ``GRPOTrainer`` and our reward
functions read:

- ``prompt``: the chat messages (``fleet_rl.prompts.build_messages``), TRL's conversational format;
- ``scenario``: the scenario JSON the rewards score against;
- ``task`` and ``seed``: which generator item it is (``make_scenario(task, seed, split)``);
- ``agent`` and ``given_plan``: for ``multiagent`` rows, the job the prompt asks for and the other jobs'
  parts as JSON (``fleet_rl.multiagent``); empty strings on other rows.

Row k's task is drawn from ``Random("fleet_rl/dataset/<dataset_seed>")`` with ``task_weights``; its generator
seed is ``dataset_seed · 1_000_000 + (its index within that task)``, so two runs with the same arguments
build the same rows, and different ``dataset_seed`` values draw disjoint items. With ``curriculum`` the rows
are ordered task by task in the order given (easy before hard). Training uses ``split="train"``, which
never contains the held-out GPUs and model; evaluation uses ``split="eval"``
(``fleet_rl.scenario_generator``).

``sft_dataset(..., target=...)`` pairs the same prompts with a target answer (a plan as a ```json fence) in
TRL's conversational prompt-completion format, so ``SFTTrainer`` trains on the answers only. The target
planners (``SFT_TARGET_PLANNERS``, from ``fleet_rl.baselines``):

- ``even_split``: the ``even_bf16`` baseline (even GPU split, 16-bit, fp32 norms): valid, rarely optimal;
- ``random``: the ``random`` baseline's schema-valid plan, seeded by the row's generator seed: the format,
  almost nothing about good plans (a model imitating it answers ``"gpus": 0`` greedily);
- ``random_split``: every job placed on a random share of all the GPUs with random settings;
- ``random_feasible``: a ``random_split`` draw under which every placed job runs (redrawn up to 256 times):
  the format, the job ids and what runs, not what runs well (what GRPO finds alone is measured from it);
- ``heuristic``: the ``heuristic`` baseline, the plan an engineer writes from the prompt's facts (formats by
  job kind and the GPU's formats, the smallest tensor parallelism that fits, the GPUs split by priority):
  distilling rules a small model can read off the ``sized_batching`` prompt, where the optimum's formats
  change from scenario to scenario (issue #68);
- ``optimal``: the exact optimum: distilling the solver (the SmolLM2 preset). GRPO's claim from it is its
  gain over that start; the learning benchmark's ``fair_start`` says what a start imitated.

For multi-agent rows every target is the agent's own part of the planner's whole plan, as for the oracle
(``heuristic`` plans that part around the other jobs' given parts, as the prompt shows them).
"""

from __future__ import annotations

import inspect
import json
import random
from collections.abc import Callable, Sequence

from datasets import Dataset

from fleet_rl.baselines import even_bf16, heuristic, optimal, random_feasible, random_plan, random_split
from fleet_rl.multiagent import agent_request, own_part
from fleet_rl.prompts import build_messages, format_answer
from fleet_rl.scenario import Scenario
from fleet_rl.scenario_generator import SPLITS, TASKS, make_scenario
from fleet_rl.training.split_note import with_split_note

__all__ = [
    "SEED_STRIDE",
    "SFT_TARGET_PLANNERS",
    "check_task_mix",
    "grpo_dataset",
    "planner_answer",
    "scenario_rows",
    "sft_dataset",
    "sft_target_plan",
]

SEED_STRIDE = 1_000_000  # generator seeds per dataset_seed: disjoint streams for num_prompts < 1e6

# Warm-start targets (``FleetScriptArguments.sft_target``): planner(scenario, seed) -> whole plan dict.
SFT_TARGET_PLANNERS = {
    "even_split": even_bf16,
    "random": random_plan,
    "random_split": random_split,
    "random_feasible": random_feasible,
    "heuristic": heuristic,
    "optimal": optimal,
}


def check_task_mix(tasks: Sequence[str], task_weights: Sequence[float] | None, num_prompts: int) -> None:
    """Raise ``ValueError`` naming the problem with a task mix (also run by ``train_grpo.py``'s option
    checks, before any model loads)."""
    unknown = [task for task in tasks if task not in TASKS]
    if not tasks or unknown:
        raise ValueError(f"unknown or no tasks {unknown or list(tasks)}; valid tasks: {', '.join(TASKS)}")
    if task_weights is not None and (
        len(task_weights) != len(tasks) or any(w < 0 for w in task_weights) or sum(task_weights) <= 0
    ):
        raise ValueError(f"task_weights must be {len(tasks)} non-negative numbers with a positive sum")
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be positive, got {num_prompts}")


def _task_sequence(
    tasks: Sequence[str],
    num_prompts: int,
    dataset_seed: int,
    task_weights: Sequence[float] | None,
    curriculum: bool,
) -> list[str]:
    check_task_mix(tasks, task_weights, num_prompts)
    rng = random.Random(f"fleet_rl/dataset/{dataset_seed}")
    sequence = rng.choices(list(tasks), weights=task_weights, k=num_prompts)
    if curriculum:
        sequence.sort(key=list(tasks).index)
    return sequence


def scenario_rows(
    tasks: Sequence[str],
    num_prompts: int,
    *,
    dataset_seed: int = 0,
    split: str = "train",
    task_weights: Sequence[float] | None = None,
    curriculum: bool = False,
    prompt_style: str = "full",
) -> list[dict]:
    """The rows of ``grpo_dataset`` as plain dicts (see the module docstring)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; valid splits: {', '.join(SPLITS)}")
    counters = dict.fromkeys(TASKS, 0)
    rows = []
    for task in _task_sequence(tasks, num_prompts, dataset_seed, task_weights, curriculum):
        seed = dataset_seed * SEED_STRIDE + counters[task]
        counters[task] += 1
        scenario = make_scenario(task, seed, split)
        agent, given = agent_request(scenario, seed) if task == "multiagent" else ("", None)
        rows.append(
            {
                "prompt": build_messages(scenario, agent=agent or None, given_plan=given, style=prompt_style),
                "scenario": scenario.to_json(),
                "task": task,
                "seed": seed,
                "agent": agent,
                "given_plan": json.dumps(given, separators=(",", ":")) if given else "",
            }
        )
    return rows


def grpo_dataset(tasks: Sequence[str], num_prompts: int, **kwargs) -> Dataset:
    """GRPO prompts: ``prompt``, ``scenario``, ``task``, ``seed``, ``agent``, ``given_plan`` columns."""
    return Dataset.from_list(scenario_rows(tasks, num_prompts, **kwargs))


def planner_answer(planner: Callable[..., dict], row: dict) -> dict:
    """A planner's answer to one ``scenario_rows`` row: its plan for the row's scenario (seeded by the row's
    generator seed), cut to the agent's own part on multi-agent rows (``fleet_rl.multiagent.own_part``).
    A planner with a ``given_plan`` parameter (``heuristic``) sees a multi-agent row's given parts, as the
    prompt shows them; the others plan the whole scenario blind to them. Warm-start targets and
    ``eval.py``'s baselines answer this way."""
    scenario = Scenario.from_json(row["scenario"])
    if row["agent"] and "given_plan" in inspect.signature(planner).parameters:
        plan = planner(scenario, row["seed"], given_plan=json.loads(row["given_plan"]))
    else:
        plan = planner(scenario, row["seed"])
    return own_part(plan, row["agent"])


def sft_target_plan(row: dict, target: str) -> dict:
    """The plan a warm start imitates for one ``scenario_rows`` row: the ``target`` planner's answer."""
    if target not in SFT_TARGET_PLANNERS:
        raise ValueError(f"unknown sft target {target!r}; valid: {', '.join(SFT_TARGET_PLANNERS)}")
    return planner_answer(SFT_TARGET_PLANNERS[target], row)


def sft_dataset(
    tasks: Sequence[str], num_examples: int, *, target: str = "optimal", split_note: bool = False, **kwargs
) -> Dataset:
    """Warm-start pairs: ``prompt`` messages and the ``target`` planner's ``completion`` (see the module
    docstring; ``optimal`` is the exact optimum's part(s), ``even_split`` and ``random`` are baselines).
    With ``split_note`` each answer opens with the plan's GPU split and a running count of the GPUs left
    (``fleet_rl.training.split_note``)."""
    examples = []  # an unknown target: sft_target_plan's error on the first row
    for row in scenario_rows(tasks, num_examples, **kwargs):
        plan = sft_target_plan(row, target)
        content = with_split_note(format_answer(plan), plan, row) if split_note else format_answer(plan)
        examples.append({"prompt": row["prompt"], "completion": [{"role": "assistant", "content": content}]})
    return Dataset.from_list(examples)
