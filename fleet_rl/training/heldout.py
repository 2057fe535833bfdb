"""Evaluate a policy on held-out scenarios: greedy answers scored by the same rewards as training.

``evaluate_policy(model, tokenizer, ...)`` draws ``split="eval"`` scenarios (held-out GPUs and model,
``fleet_rl.scenario_generator``), renders the same prompts as training, generates one greedy answer each and
scores them with ``rewards.score_completions`` and ``rewards.fleet_reward``: one reward path for training,
evaluation and benchmarks. It returns plain numbers (JSON-ready) and a few sample answers.

``mean_percent_of_optimum`` is the kernel score with IRD-flagged (degenerate) plans counted as 0, like
``efficiency_reward``: a plan that starves a job can still run the others and score above 0, but it earns
no credit. ``mean_kernel_percent_of_optimum`` is the raw kernel score of every plan, for comparison.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fleet_rl.baselines import BASELINES
from fleet_rl.prompts import format_answer
from fleet_rl.training.dataset import planner_answer, scenario_rows
from fleet_rl.training.job_placement import placed_job_shares
from fleet_rl.training.setting_variety import distinct_settings_per_kind
from fleet_rl.training.unseen_split import UNSEEN_KINDS, unseen_kind
from rewards import fleet_reward, score_completions
from rewards.scoring import CRASHES

__all__ = [
    "BREAKDOWNS",
    "EVAL_DATASET_SEED",
    "evaluate_baseline",
    "evaluate_policy",
    "generate_ids",
    "prompt_ids",
    "summarise",
]

BREAKDOWNS = ("per_task", "per_unseen")  # the summary's keys holding its stats over parts of the rows
EVAL_DATASET_SEED = 7  # eval scenarios are drawn from their own split; this fixes which ones


def prompt_ids(tokenizer, prompts: Sequence[list[dict]]) -> list[list[int]]:
    """Each conversational prompt as the token ids generation starts from (chat template, answer header)."""
    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def _generate(model, tokenizer, prompts: list[list[dict]], max_new_tokens: int, batch_size: int) -> list[str]:
    """Greedy answers to conversational prompts, in batches."""
    continuations = generate_ids(model, tokenizer, prompt_ids(tokenizer, prompts), max_new_tokens, batch_size)
    return tokenizer.batch_decode(continuations, skip_special_tokens=True)


def generate_ids(model, tokenizer, id_prompts: list[list[int]], max_new_tokens: int, batch_size: int):
    """Greedy continuations of token-id prompts (left-padded in batches), each cut after its first end token
    (kept), as TRL cuts its completions."""
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    continuations: list[list[int]] = []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(id_prompts), batch_size):
            batch = id_prompts[start : start + batch_size]
            width = max(len(ids) for ids in batch)
            input_ids = torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids in batch])
            attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
            with torch.no_grad():
                output = model.generate(
                    input_ids=input_ids.to(model.device),
                    attention_mask=attention_mask.to(model.device),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    pad_token_id=pad,
                    eos_token_id=eos,
                )
            for row in output[:, width:].tolist():
                continuations.append(row[: row.index(eos) + 1] if eos in row else row)
    finally:
        model.train(was_training)
    return continuations


def summarise(
    rows: Sequence[dict], completions: Sequence[str], completion_tokens: Sequence[int] | None = None
) -> dict:
    """Rates and means of scored completions, overall and per task (percentages of the exact optimum).

    ``crash_rate``: answers in which a placed job crashes (``oom``, ``unsupported``, ``unstable``; each
    also alone, ``<status>_rate``). ``placed_job_share``: the mean share of the jobs asked for that the
    answers place with gpus > 0 (``job_placement``: left-out jobs show here, not among the crashes).
    ``mean_completion_tokens`` when token counts are given (model policies). ``distinct_settings_per_kind``
    (overall only): distinct (tensor_parallel, formats, kv_cache) settings the answers give the jobs they
    place, per job kind (``setting_variety``; one or two per kind is a template). ``per_unseen``: the same
    stats over the scenarios whose GPU, model, or both training never showed (``unseen_split``)."""
    columns = {
        "scenario": [row["scenario"] for row in rows],
        "agent": [row["agent"] for row in rows],
        "given_plan": [row["given_plan"] for row in rows],
    }
    scores = score_completions(list(completions), columns.pop("scenario"), **columns)
    rewards = np.array(fleet_reward(list(completions), [row["scenario"] for row in rows], **columns))
    tasks = np.array([row["task"] for row in rows])
    tokens = None if completion_tokens is None else np.asarray(completion_tokens, dtype=float)
    credited = np.where(scores.ird, 0.0, scores.score)  # a degenerate (IRD) plan earns no credit
    placed = np.array(placed_job_shares([row["scenario"] for row in rows], completions, columns["agent"]))

    def stats(mask: np.ndarray) -> dict:
        return {
            "num_scenarios": int(mask.sum()),
            "mean_percent_of_optimum": float(100.0 * credited[mask].mean()),
            "mean_kernel_percent_of_optimum": float(100.0 * scores.score[mask].mean()),
            "valid_plan_rate": float(scores.has_plan[mask].mean()),
            "feasible_rate": float(scores.feasible[mask].mean()),
            "ird_rate": float(scores.ird[mask].mean()),
            "crash_rate": float(scores.crashes[mask].any(axis=1).mean()),
            **{f"{status}_rate": float(scores.crashes[mask, k].mean()) for k, status in enumerate(CRASHES)},
            "mean_fleet_reward": float(rewards[mask].mean()),
            "placed_job_share": float(placed[mask].mean()),
        } | ({} if tokens is None else {"mean_completion_tokens": float(tokens[mask].mean())})

    summary = stats(np.ones(len(rows), dtype=bool))
    summary["distinct_settings_per_kind"] = distinct_settings_per_kind(
        [row["scenario"] for row in rows], completions
    )
    summary["per_task"] = {task: stats(tasks == task) for task in dict.fromkeys(tasks.tolist())}
    unseen = np.array([unseen_kind(row["scenario"]) for row in rows])
    summary["per_unseen"] = {kind: stats(unseen == kind) for kind in UNSEEN_KINDS if (unseen == kind).any()}
    return summary


def evaluate_policy(
    model,
    tokenizer,
    *,
    num_scenarios: int,
    tasks: Sequence[str],
    prompt_style: str = "full",
    max_new_tokens: int = 512,
    batch_size: int = 8,
    dataset_seed: int = EVAL_DATASET_SEED,
    num_samples: int = 3,
) -> dict:
    """Greedy answers to ``num_scenarios`` held-out prompts, scored (see ``summarise``), plus samples."""
    rows = scenario_rows(
        tasks, num_scenarios, dataset_seed=dataset_seed, split="eval", prompt_style=prompt_style
    )
    completions = _generate(model, tokenizer, [row["prompt"] for row in rows], max_new_tokens, batch_size)
    tokens = [len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in completions]
    summary = summarise(rows, completions, tokens)
    summary["samples"] = [
        {"task": row["task"], "seed": row["seed"], "completion": completion}
        for row, completion in list(zip(rows, completions, strict=True))[:num_samples]
    ]
    return summary


def evaluate_baseline(
    name: str, *, num_scenarios: int, tasks: Sequence[str], dataset_seed: int = EVAL_DATASET_SEED
) -> dict:
    """A baseline planner's answers (``fleet_rl.baselines``; multi-agent rows: its part for the agent's job)
    to the held-out rows ``evaluate_policy`` answers with the same arguments, scored (see ``summarise``)."""
    rows = scenario_rows(tasks, num_scenarios, dataset_seed=dataset_seed, split="eval")
    return summarise(rows, [format_answer(planner_answer(BASELINES[name], row)) for row in rows])
