"""How far a policy gets without reading the scenario: the best scenario-blind template per tier.

    python -m benchmarks.reward.templates [--tasks easy medium hard] [--scenarios 200] [--split eval]
    python -m benchmarks.reward.templates --floor_prob 1 --floor_fractions 0.5 0.7 0.9   # a what-if

A *template* copies the job ids and the GPU count from the prompt, splits the GPUs by a fixed rule and gives
every job of a kind the same fixed setting: one tensor-parallel target, one precision map, one micro-batch
and checkpointing choice (train, lora), one KV format (serve). Nothing else of the scenario is read: not
the GPU, the model, the context length or the memory. The tensor parallelism is the largest size up to the
target that divides the job's GPU share and its model's attention heads (any other choice is an invalid
plan, which no one would write).

The search. A plan's score is clip(Σ job values ÷ the optimum's objective, 0, 1); a job's value depends
only on its own setting and GPU share, and a job the rule leaves idle is worth 0, or minus its priority if it
has a throughput floor (``kernel/constants.py``: a missed floor costs). Every (job, setting) pair of the grid
is simulated (vectorised, millions of rows per second). Without the clip the best template would take, per
kind, the setting with the largest Σ over that kind's jobs of value ÷ optimum; the search starts there and
then improves the clipped mean one kind at a time, until no kind's setting changes: exact where every
scenario's placed jobs share a kind (easy), a local optimum on the mixed tiers (a template it misses could
score higher). The winner is scored again as real plans through ``evaluate_batch``: that is the number
reported, and it equals the search's own figure.

Grid: tensor-parallel target 1/2/4/8; precision maps with embedding, attention, mlp and lm_head in any of
the six formats and norms in fp32/bf16/fp16 (3,888 maps); micro-batch 1-64 with and without checkpointing
and any sharding (training kinds); any KV format (serve). Split rules: ``even`` (remainder to the highest
priorities, like ``even_bf16``), ``priority`` (proportional to priority, largest remainders, every job at
least one GPU while they last) and ``top`` (every GPU to the highest-priority job). The report also gives
``even_bf16`` and ``heuristic`` on the same scenarios, and how many distinct optimal plans the first 60
scenarios of each split have (a task whose optimum rarely changes can be learned as a constant; the train
split is what a policy learns from, and the eval split repeats itself more, since half its scenarios put
the one held-out model on a job).

``--floor_prob`` and ``--floor_fractions`` ask what other throughput floors would do: the scenarios are
drawn from a copy of each tier with that ``floor_prob`` and those ``floor_fractions`` (the report records
them); the clusters and jobs stay the committed ones (floors are drawn last), and the committed tiers are
never changed.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchmarks.machine import cpu_model
from fleet_rl import scenario_generator
from fleet_rl.baselines import even_bf16, heuristic
from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import evaluate_batch
from fleet_rl.kernel.constants import KINDS, SERVE
from fleet_rl.kernel.job_table import JobTable
from fleet_rl.kernel.simulate import PlanRows, job_values, missed_floor_value, simulate
from fleet_rl.plan_schema import MICRO_BATCH_SIZES, SHARDINGS, TENSOR_PARALLEL_SIZES
from fleet_rl.scenario import Scenario
from fleet_rl.scenario_generator import TierSpec, draw_scenario
from fleet_rl.solved_scenarios import solved_scenario

NORM_FORMATS = ("fp32", "bf16", "fp16")  # fp8/int8/int4 norms are unstable in every kind
DISTINCT_OPTIMA_SCENARIOS = 60
SETTINGS_PER_PASS = 4096  # settings simulated together (× jobs rows)


@dataclass(frozen=True)
class Setting:
    """One kind's fixed part of a template."""

    tensor_parallel: int  # target; the plan uses the largest dividing size up to it
    precision: tuple[str, ...]  # per module group, in MODULE_GROUPS order
    micro_batch_size: int
    activation_checkpointing: bool
    kv_cache: str
    sharding: str

    def fields(self, serve: bool) -> dict:
        """The plan fields this kind reads, besides ids, GPUs and tensor parallelism."""
        fields: dict = {"precision": dict(zip(MODULE_GROUPS, self.precision, strict=True))}
        if serve:
            return fields | {"kv_cache": self.kv_cache}
        checkpointing = self.activation_checkpointing
        fields |= {"micro_batch_size": self.micro_batch_size, "activation_checkpointing": checkpointing}
        return fields | ({"sharding": self.sharding} if self.sharding != "none" else {})

    def job_plan(self, job_id: str, gpus: int, heads: int, serve: bool) -> dict:
        tp = tensor_parallel(self.tensor_parallel, gpus, heads)
        return {"id": job_id, "gpus": gpus, "tensor_parallel": tp} | self.fields(serve)


def tensor_parallel(target: int, gpus: int, heads: int) -> int:
    """The largest schema size ≤ ``target`` dividing ``gpus`` and ``heads`` (1 divides everything)."""
    return max(tp for tp in TENSOR_PARALLEL_SIZES if tp <= target and gpus % tp == 0 and heads % tp == 0)


def settings_grid(kind: int) -> list[Setting]:
    """Every setting of the grid for a job kind (serve: no micro-batch or checkpointing; others: no KV)."""
    free = (*[PRECISIONS] * 3, NORM_FORMATS, PRECISIONS)  # embedding, attention, mlp, norm, lm_head
    maps = list(itertools.product(*free))
    if kind == SERVE:
        rest = [(1, False, kv, "none") for kv in PRECISIONS]
    else:
        rest = [
            (mb, ckpt, "bf16", sharding)
            for mb in MICRO_BATCH_SIZES
            for ckpt in (False, True)
            for sharding in SHARDINGS
        ]
    return [Setting(tp, m, *r) for tp in TENSOR_PARALLEL_SIZES for m in maps for r in rest]


# --- GPU split rules: (GPU count, priorities) -> GPUs per job ---------------------------------------------


def split_even(count: int, priorities: list[float]) -> list[int]:
    share = [count // len(priorities)] * len(priorities)
    for i in sorted(range(len(priorities)), key=lambda i: -priorities[i])[: count % len(priorities)]:
        share[i] += 1
    return share


def split_priority(count: int, priorities: list[float]) -> list[int]:
    """Proportional to priority by largest remainders, every job at least one GPU while they last."""
    jobs = len(priorities)
    share = [1 if i < count else 0 for i in range(jobs)]
    left = count - sum(share)
    total = sum(priorities)
    exact = [left * p / total for p in priorities]
    share = [s + math.floor(e) for s, e in zip(share, exact, strict=True)]
    by_remainder = sorted(range(jobs), key=lambda i: -(exact[i] - math.floor(exact[i])))
    for i in by_remainder[: count - sum(share)]:
        share[i] += 1
    return share


def split_top(count: int, priorities: list[float]) -> list[int]:
    top = max(range(len(priorities)), key=lambda i: priorities[i])
    return [count if i == top else 0 for i in range(len(priorities))]


SPLIT_RULES: dict[str, Callable[[int, list[float]], list[int]]] = {
    "even": split_even,
    "priority": split_priority,
    "top": split_top,
}


def template_plan(scenario: Scenario, rule: str, settings: dict[int, Setting]) -> dict:
    """The plan a template writes for ``scenario`` (ids, GPU split, one setting per kind)."""
    jobs = scenario.jobs
    shares = SPLIT_RULES[rule](scenario.cluster.count, [job.priority for job in jobs])
    parts = []
    for job, gpus in zip(jobs, shares, strict=True):
        kind = KINDS.index(job.kind)
        if gpus:
            heads = job.model_spec.num_attention_heads
            parts.append(settings[kind].job_plan(job.id, gpus, heads, kind == SERVE))
    return {"jobs": parts}


# --- the exact search ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Placed:
    """The jobs a split rule gives GPUs, over a list of scenarios (in scenario order), and the constants."""

    job: np.ndarray  # global job index into the concatenated JobTable
    gpus: np.ndarray
    scenario: np.ndarray  # index into the scenario list
    weight: np.ndarray  # 1 / the scenario's optimal objective
    idle_share: np.ndarray  # (S,) Σ over the jobs the rule leaves idle of their value ÷ the optimum


def best_settings(scenarios: list[Scenario], rule: str) -> tuple[dict[int, Setting], float]:
    """The template with the best mean score under ``rule`` that the search finds, and that mean as the
    search computes it.

    A scenario's score is clip(Σ job values ÷ optimum, 0, 1). A job's value depends only on its own setting
    and GPU share, and an idle job's value (0, or a missed floor's cost) on nothing, so without the clip the
    best template would take, per kind, the setting with the largest Σ over that kind's jobs of value ÷
    optimum. That is where the search starts; then, kind by kind, it takes the setting with the best clipped
    mean with the other kinds' settings fixed, until no kind changes (exact where a scenario's placed jobs
    are all of one kind, as on easy; elsewhere a local optimum, so a template the search misses could score
    higher)."""
    solved = [solved_scenario(s) for s in scenarios]
    table = JobTable.concatenate([s.table for s in solved])
    reference = np.concatenate([s.reference_tokens_per_s for s in solved])
    placed = _placed_jobs(scenarios, solved, rule)
    kinds = [kind for kind in range(len(KINDS)) if (table.kind[placed.job] == kind).any()]
    num = len(scenarios)
    grids = {kind: settings_grid(kind) for kind in kinds}
    best: dict[int, Setting] = {}
    for kind in kinds:
        mine = table.kind[placed.job] == kind
        unclipped = [
            sums.sum(axis=1) for sums, _ in _scenario_sums(table, reference, placed, mine, grids[kind], num)
        ]
        best[kind] = grids[kind][int(np.argmax(np.concatenate(unclipped)))]
    current = {kind: _scenario_sums_of(table, reference, placed, kind, best[kind], num) for kind in kinds}
    for _ in range(len(kinds) * 4):  # coordinate ascent on the clipped mean, until a round changes nothing
        changed = False
        for kind in kinds:
            others = placed.idle_share + sum(current[k] for k in kinds if k != kind)
            mine = table.kind[placed.job] == kind
            scores = []
            for sums, present in _scenario_sums(table, reference, placed, mine, grids[kind], num):
                fixed = np.clip(np.delete(others, present), 0.0, 1.0).sum()
                scores.append(np.clip(others[present] + sums, 0.0, 1.0).sum(axis=1) + fixed)
            scores = np.concatenate(scores)
            here = float(np.clip(others + current[kind], 0.0, 1.0).sum())
            choice = int(np.argmax(scores))
            if scores[choice] > here + 1e-12:
                best[kind] = grids[kind][choice]
                current[kind] = _scenario_sums_of(table, reference, placed, kind, best[kind], num)
                changed = True
        if not changed:
            break
    found = float(np.clip(placed.idle_share + sum(current.values()), 0.0, 1.0).sum())
    return best, found / num


def _placed_jobs(scenarios: list[Scenario], solved: list, rule: str) -> _Placed:
    job, gpus, scenario_of, weight = [], [], [], []
    idle_share = np.zeros(len(scenarios))
    offset = 0
    for i, (scenario, sol) in enumerate(zip(scenarios, solved, strict=True)):
        shares = SPLIT_RULES[rule](scenario.cluster.count, [job.priority for job in scenario.jobs])
        idle_value = missed_floor_value(sol.table)
        for j, share in enumerate(shares):
            if share:
                job.append(offset + j)
                gpus.append(share)
                scenario_of.append(i)
                weight.append(1.0 / sol.optimal_objective)
            else:
                idle_share[i] += idle_value[j] / sol.optimal_objective
        offset += len(scenario.jobs)
    return _Placed(np.array(job), np.array(gpus), np.array(scenario_of), np.array(weight), idle_share)


def _scenario_sums_of(table, reference, placed: _Placed, kind: int, setting: Setting, num: int) -> np.ndarray:
    """(S,) Σ over each scenario's placed jobs of ``kind`` of value ÷ optimum under ``setting``."""
    mine = table.kind[placed.job] == kind
    out = np.zeros(num)
    for sums, present in _scenario_sums(table, reference, placed, mine, [setting], num):
        out[present] = sums[0]
    return out


def _scenario_sums(table, reference, placed: _Placed, mine: np.ndarray, grid: list[Setting], num: int):
    """Per pass of ``SETTINGS_PER_PASS`` settings of ``grid``: ((k, P) Σ over each scenario's jobs in ``mine``
    of value ÷ optimum, the P scenarios that have such jobs), vectorised."""
    jobs, gpus, weight = placed.job[mine], placed.gpus[mine], placed.weight[mine]
    scenario_of = placed.scenario[mine]  # non-decreasing: jobs were collected in scenario order
    present, first = np.unique(scenario_of, return_index=True)
    heads = table.num_heads[jobs]
    # effective tensor parallelism of each job for each target
    tp_of = {
        target: np.array([tensor_parallel(target, int(g), int(h)) for g, h in zip(gpus, heads, strict=True)])
        for target in TENSOR_PARALLEL_SIZES
    }
    code = {p: i for i, p in enumerate(PRECISIONS)}
    n = jobs.size
    for start in range(0, len(grid), SETTINGS_PER_PASS):
        chunk = grid[start : start + SETTINGS_PER_PASS]
        k = len(chunk)
        rows = PlanRows(
            job=np.tile(jobs, k),
            gpus=np.tile(gpus, k),
            tensor_parallel=np.concatenate([tp_of[s.tensor_parallel] for s in chunk]),
            precision=np.repeat(np.array([[code[p] for p in s.precision] for s in chunk]), n, axis=0),
            micro_batch_size=np.repeat(np.array([s.micro_batch_size for s in chunk]), n),
            activation_checkpointing=np.repeat(np.array([s.activation_checkpointing for s in chunk]), n),
            kv_cache=np.repeat(np.array([code[s.kv_cache] for s in chunk]), n),
            sharding=np.repeat(np.array([SHARDINGS.index(s.sharding) for s in chunk]), n),
            invalid=np.zeros(k * n, dtype=bool),
        )
        values = job_values(table, rows, simulate(table, rows), reference)
        yield np.add.reduceat(values.reshape(k, n) * weight, first, axis=1), present


def mean_percent(scenarios: list[Scenario], plans: list[dict]) -> float:
    return 100.0 * float(np.mean([e.score for e in evaluate_batch(scenarios, plans)]))


def distinct_optima(tier: TierSpec, task: str, split: str, count: int = DISTINCT_OPTIMA_SCENARIOS) -> int:
    """How many of the first ``count`` scenarios' optimal plans differ (job ids replaced by their index)."""
    seen = set()
    for seed in range(count):
        plan = solved_scenario(draw_scenario(tier, task, seed, split)).optimal_plan
        seen.add(json.dumps([{**part, "id": i} for i, part in enumerate(plan["jobs"])], sort_keys=True))
    return len(seen)


def describe(settings: dict[int, Setting], kinds: set[int]) -> dict:
    return {
        KINDS[kind]: {"tensor_parallel_target": settings[kind].tensor_parallel}
        | settings[kind].fields(kind == SERVE)
        for kind in sorted(kinds)
    }


def run_task(task: str, num_scenarios: int, split: str, tier: TierSpec) -> dict:
    """The report for ``num_scenarios`` scenarios of ``task`` drawn from ``tier`` (the committed one, or it
    with floors for a what-if)."""
    start = time.perf_counter()
    scenarios = [draw_scenario(tier, task, seed, split) for seed in range(num_scenarios)]
    kinds = {KINDS.index(job.kind) for s in scenarios for job in s.jobs}
    rules = {}
    for rule in SPLIT_RULES:
        settings, predicted = best_settings(scenarios, rule)
        plans = [template_plan(s, rule, settings) for s in scenarios]
        rules[rule] = {
            "percent_of_optimum": round(mean_percent(scenarios, plans), 1),
            "search_predicted_percent": round(100.0 * predicted, 1),
            "settings": describe(settings, kinds),
        }
    best_rule = max(rules, key=lambda r: rules[r]["percent_of_optimum"])
    return {
        "scenarios": num_scenarios,
        "best_template_percent": rules[best_rule]["percent_of_optimum"],
        "best_rule": best_rule,
        "even_bf16_percent": round(mean_percent(scenarios, [even_bf16(s) for s in scenarios]), 1),
        "heuristic_percent": round(mean_percent(scenarios, [heuristic(s) for s in scenarios]), 1),
        f"distinct_optimal_plans_of_first_{DISTINCT_OPTIMA_SCENARIOS}": {
            name: distinct_optima(tier, task, name) for name in scenario_generator.SPLITS
        },
        "rules": rules,
        "seconds": round(time.perf_counter() - start, 1),
    }


def tier_for_run(task: str, floor_prob: float | None, floor_fractions: tuple[float, ...]) -> TierSpec:
    """The tier this run draws ``task`` from: the committed one, or (``floor_prob`` given) it drawing its
    throughput floors with ``floor_prob`` and ``floor_fractions``; the committed tiers are never changed."""
    tier = scenario_generator.TIERS[task]
    if floor_prob is None:
        return tier
    return dataclasses.replace(tier, floor_prob=floor_prob, floor_fractions=floor_fractions)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["easy", "medium", "hard"])
    parser.add_argument("--scenarios", type=int, default=200, help="scenarios per task (seeds 0..N-1)")
    parser.add_argument("--split", default="eval", choices=["train", "eval"])
    parser.add_argument("--floor_prob", type=float, help="what-if: every tier's floor_prob")
    parser.add_argument("--floor_fractions", type=float, nargs="+", default=[0.5, 0.7, 0.9])
    args = parser.parse_args(argv)
    if args.floor_prob is not None and not (0.0 <= args.floor_prob <= 1.0):
        parser.error(f"--floor_prob must be in [0, 1], got {args.floor_prob}")
    if not all(0.0 < f <= 1.0 for f in args.floor_fractions):
        parser.error(f"--floor_fractions must be in (0, 1], got {args.floor_fractions}")
    fractions = tuple(args.floor_fractions)
    report: dict = {"machine": cpu_model(), "split": args.split}
    if args.floor_prob is not None:
        report["floors"] = {"floor_prob": args.floor_prob, "floor_fractions": list(fractions)}
    report["tasks"] = {
        task: run_task(task, args.scenarios, args.split, tier_for_run(task, args.floor_prob, fractions))
        for task in args.tasks
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
