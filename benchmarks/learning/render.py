"""Learning benchmark, the README table: ``render(result)`` turns a result JSON into the markdown table and
the lines under it (``python -m benchmarks.learning --render RESULT_JSON``)."""

from __future__ import annotations

import numpy as np

from benchmarks.learning.statistics import METRICS
from rewards.scoring import CRASHES

__all__ = ["plural", "render"]


def _signed(value: float, digits: int) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


def _first_last(values: list, window: int = 10) -> tuple[float, float] | None:
    """Mean of the first and of the last ``window`` values (fewer, so they never overlap, on short curves)."""
    values = [value for value in values if value is not None]
    if not values:
        return None
    window = max(1, min(window, len(values) // 2))
    return float(np.mean(values[:window])), float(np.mean(values[-window:]))


# Warm-start targets that hand the model what it is measured against (fair_start false), so a run from them
# claims GRPO's gain over its start, never the policy's score: the exact optimum, or a baseline's plans
# (even_bf16's template, the heuristic's rules) that the trained policy is measured against.
UNFAIR_START_TARGETS = {
    "optimal": "the exact optimum",
    "even_split": "the even_bf16 baseline's plans, which the trained policy is measured against",
    "heuristic": "the heuristic baseline's plans, which the trained policy is measured against",
}
# Unfair starts that distil a planner on purpose (issue #68): a result's claim for GRPO is its gain over them.
DISTILLED_TARGETS = {
    "optimal": "the exact optimum",
    "heuristic": "the heuristic baseline's plans (formats by job kind and GPU, the smallest tensor "
    "parallelism that fits, GPUs by priority)",
}
SEED_WALL_PARTS = ("setup", "warm_start", "grpo", "eval_start", "eval_after")  # one seed's run, end to end


def _seeds_total(wall: dict) -> str:
    """The seeds' wall time summed from their own records: ``wall["total"]`` is this invocation's, which
    leaves out seeds kept from an earlier run with ``--reuse``."""
    per_seed = wall.get("per_seed") or []
    if not per_seed:
        return "n/a" if wall.get("total") is None else f"{wall['total']:.0f} s"
    return f"{sum(seed.get(part) or 0.0 for seed in per_seed for part in SEED_WALL_PARTS):.0f} s"


def _per_seed_and_tier(result: dict) -> str:
    """One line: each seed's start → after mean % of optimum on each task tier (from ``per_scenario``)."""
    table = result["per_scenario"]
    tasks = np.array(table["task"])
    starts, afters = table["start_percent_of_optimum"], table["after_percent_of_optimum"]
    parts = []
    for k, seed in enumerate(result["seeds"]):
        start = np.array(starts[min(k, len(starts) - 1)])  # one start for every seed when none is trained
        after = np.array(afters[k])
        tiers = ", ".join(
            f"{task} {start[tasks == task].mean():.1f} → {after[tasks == task].mean():.1f}"
            for task in result["eval"]["eval_tasks"]
        )
        parts.append(f"seed {seed}: {tiers}")
    return "Mean % of optimum, start → after, by seed and tier: " + "; ".join(parts) + "."


# How each fault of rewards.scoring.CRASHES reads in the line under the table.
FAULT_LABELS = {
    "oom": "out of memory",
    # a format the GPU lacks, tensor parallelism that does not divide the heads, sharding a serving job
    "unsupported": "an unsupported setting",
    "unstable": "unstable numerics",
    "too_slow": "under its throughput floor",
}


def _seed_summaries(result: dict, keys: list[str]) -> list[tuple[int, dict, dict]] | None:
    """(seed, its start summary, its after summary) per seed, when every per-seed summary holds ``keys``
    (one start may serve every seed); ``None`` for results without them (older results lack newer keys)."""
    starts, afters = result["start"].get("per_seed") or [], result["after"].get("per_seed") or []
    if not starts or len(afters) != len(result["seeds"]):
        return None
    if any(key not in summary for summary in (*starts, *afters) for key in keys):
        return None
    return [(seed, starts[min(k, len(starts) - 1)], afters[k]) for k, seed in enumerate(result["seeds"])]


def _faults_by_seed(result: dict) -> str | None:
    """One line: per seed, the share of held-out answers with a job failing for each reason, start → after.

    What a policy learned shows here when its mean moves little: a seed may trade one fault for another (a
    template that never runs out of memory but writes a setting the kernel does not support). ``None`` for
    results whose per-seed summaries predate the fault rates."""
    by_seed = _seed_summaries(result, [f"{fault}_rate" for fault in CRASHES])
    if by_seed is None:
        return None
    parts = []
    for seed, start, after in by_seed:
        faults = ", ".join(
            f"{FAULT_LABELS[fault]} {start[f'{fault}_rate']:.2f} → {after[f'{fault}_rate']:.2f}"
            for fault in CRASHES
        )
        parts.append(f"seed {seed}: {faults}")
    return (
        "Share of the held-out answers with a job failing for each reason, start → after: "
        + "; ".join(parts)
        + "."
    )


def _first_plans(result: dict) -> str | None:
    """One line for revision episodes: the final plans are the table's; this is the first plans (before any
    verdict), start → after, with their paired difference. ``None`` for single-plan results."""
    first = result.get("first_plan")
    if not first:
        return None
    paired = first["paired"]
    low, high = paired["ci95"]
    per_seed = ", ".join(
        f"seed {seed} {_signed(delta, 1)}"
        for seed, delta in zip(result["seeds"], paired["per_seed"], strict=True)
    )
    return (
        f"Each answer is a revision episode of up to {result['eval'].get('eval_max_turns')} plans with the "
        f"kernel's verdict between them; the table scores the final plans. The first plans (before any "
        f"verdict), mean % of optimum: start {first['start_percent_of_optimum']:.1f} → after "
        f"{first['after_percent_of_optimum']:.1f}, after − start {_signed(paired['mean'], 1)} "
        f"[{_signed(low, 1)}, {_signed(high, 1)}] ({per_seed})."
    )


def _checkpoints(result: dict) -> str | None:
    """One line for ``--eval_checkpoints``: each earlier checkpoint's mean % of optimum on the same scenarios,
    its paired gain over the start (per seed) and the final policy's over it. ``None`` without them."""
    checkpoints = result.get("checkpoints")
    if not checkpoints:
        return None
    parts = []
    for step, figures in checkpoints.items():
        gain, rest = figures["minus_start"], figures["final_minus_this"]
        per_seed = ", ".join(_signed(delta, 1) for delta in gain["per_seed"])
        parts.append(
            f"step {step}: {figures['percent_of_optimum']:.1f} %, {_signed(gain['mean'], 1)} "
            f"[{_signed(gain['ci95'][0], 1)}, {_signed(gain['ci95'][1], 1)}] over the start ({per_seed}); "
            f"the final policy {_signed(rest['mean'], 1)} [{_signed(rest['ci95'][0], 1)}, "
            f"{_signed(rest['ci95'][1], 1)}] over it"
        )
    return "Earlier checkpoints on the same scenarios, mean % of optimum: " + "; ".join(parts) + "."


def _settings_by_seed(result: dict) -> str | None:
    """One line: per seed and job kind, the distinct settings (tensor_parallel, formats, kv_cache) of the
    greedy answers, start → after (``fleet_rl.training.setting_variety``). One or two per kind is a template;
    a policy that plans by the scenario uses more. ``None`` for results that predate the counts."""
    by_seed = _seed_summaries(result, ["distinct_settings_per_kind"])
    if by_seed is None:
        return None
    parts = []
    for seed, start_summary, after_summary in by_seed:
        start = start_summary["distinct_settings_per_kind"]
        after = after_summary["distinct_settings_per_kind"]
        kinds = ", ".join(
            f"{kind} {start.get(kind, 0)} → {after.get(kind, 0)}" for kind in {**start, **after}
        )
        parts.append(f"seed {seed}: {kinds}")
    return (
        "Distinct settings (tensor_parallel, formats, kv_cache) the answers give each job kind, "
        "start → after: " + "; ".join(parts) + "."
    )


def _placement_by_seed(result: dict) -> str | None:
    """One line: per seed, the mean share of each scenario's jobs the greedy answers place (gpus > 0),
    start → after, and the baselines' (``fleet_rl.training.job_placement``). An answer that leaves jobs out
    shows here and not among the faults. ``None`` for results that predate the share."""
    by_seed = _seed_summaries(result, ["placed_job_share"])
    if by_seed is None:
        return None
    seeds = "; ".join(
        f"seed {seed} {start['placed_job_share']:.2f} → {after['placed_job_share']:.2f}"
        for seed, start, after in by_seed
    )
    baselines = ", ".join(
        f"{name} {summary['placed_job_share']:.2f}"
        for name, summary in result.get("baselines", {}).items()
        if "placed_job_share" in summary
    )
    return (
        "Share of each scenario's jobs the answers place (gpus > 0), start → after: "
        + seeds
        + (f"; baselines: {baselines}" if baselines else "")
        + "."
    )


def _unseen_by_seed(result: dict) -> str | None:
    """One line: mean % of optimum, start → after, on the scenarios whose GPU, model or both training never
    showed (each summary's ``per_unseen``), per seed; None for results from before the split."""
    starts, afters = result["start"].get("per_seed", []), result["after"].get("per_seed", [])
    if not starts or not all("per_unseen" in summary for summary in [*starts, *afters]):
        return None
    parts = []
    for kind in ("gpu", "model", "both"):
        pairs = [
            (start["per_unseen"][kind], after["per_unseen"][kind])
            for start, after in zip(starts, afters, strict=False)
            if kind in start["per_unseen"] and kind in after["per_unseen"]
        ]
        if pairs:
            changes = " / ".join(
                f"{a['mean_percent_of_optimum']:.1f} → {b['mean_percent_of_optimum']:.1f}" for a, b in pairs
            )
            parts.append(f"unseen {kind} ({pairs[0][0]['num_scenarios']}) {changes}")
    lead = "Mean % of optimum by what training never showed (scenarios), start → after per seed: "
    return lead + "; ".join(parts) + "."


def _baselines_by_tier(result: dict) -> str:
    """One line: each baseline's mean % of optimum on each task tier (from its summary's ``per_task``)."""
    parts = []
    for name, summary in result["baselines"].items():
        tiers = ", ".join(
            f"{task} {summary['per_task'][task]['mean_percent_of_optimum']:.1f}"
            for task in result["eval"]["eval_tasks"]
            if task in summary.get("per_task", {})
        )
        parts.append(f"{name}: {tiers}")
    return "Baselines on the same scenarios (no model), mean % of optimum by tier: " + "; ".join(parts) + "."


def render(result: dict) -> str:
    """The README's markdown table (and the lines under it) from a benchmark result."""
    seeds = result["seeds"]
    header = "| policy | " + " | ".join(label for _, label, _ in METRICS.values()) + " |"
    lines = [header, "|---" * (len(METRICS) + 1) + "|"]
    for side in ("start", "after"):
        cells = [f"{result[side][key]:.{digits}f}" for key, _, digits in METRICS.values()]
        lines.append(f"| {side}: {result[side]['policy']} | " + " | ".join(cells) + " |")
    cells = []
    for name, (_, _, digits) in METRICS.items():
        paired = result["paired"][name]
        low, high = paired["ci95"]
        cells.append(f"{_signed(paired['mean'], digits)} [{_signed(low, digits)}, {_signed(high, digits)}]")
    lines.append("| **after − start** [95 % CI] | " + " | ".join(cells) + " |")
    for name, summary in result.get("baselines", {}).items():  # older results have none
        cells = [f"{summary[key]:.{digits}f}" for key, _, digits in METRICS.values()]
        lines.append(f"| baseline: {name} | " + " | ".join(cells) + " |")
    per_seed = ", ".join(
        f"seed {seed} {_signed(delta, 1)}"
        for seed, delta in zip(seeds, result["delta_per_seed"], strict=True)
    )
    lines += [
        "",
        f"{result['eval_scenarios']} held-out scenarios ({', '.join(result['eval']['eval_tasks'])}), "
        f"greedy, × {plural(len(seeds), 'training seed')}; the interval resamples scenarios "
        f"({result['bootstrap']['resamples']:,} bootstrap resamples). "
        f"After − start in % of optimum per seed: {per_seed}.",
        _per_seed_and_tier(result),
    ]
    for line in (
        _first_plans(result),
        _checkpoints(result),
        _faults_by_seed(result),
        _placement_by_seed(result),
        _settings_by_seed(result),
        _unseen_by_seed(result),
    ):
        if line:
            lines.append(line)
    if result.get("baselines"):
        lines.append(_baselines_by_tier(result))
    curves = [_first_last(curve.get("reward", [])) for curve in result["reward_curve"].values()]
    if all(curves):
        lines.append(
            "Training reward, mean of the first → last (up to) 10 logged steps: "
            + ", ".join(f"seed {seed} {a:.3f} → {b:.3f}" for seed, (a, b) in zip(seeds, curves, strict=True))
            + "."
        )
    wall = result["wall_s"]

    def seconds(key: str) -> str:
        if wall.get(key) is None:
            return "n/a"
        return f"{wall[key]:.1f} s" if wall[key] < 10 else f"{wall[key]:.0f} s"

    lines.append(
        f"Wall time, all seeds: warm start {seconds('warm_start')}, GRPO {seconds('grpo')} (generation "
        f"{seconds('generation')}, reward {seconds('reward')}, "
        f"forward/backward/optimizer {seconds('backward')}), "
        f"evaluation {_seconds_sum(wall, 'eval_start', 'eval_after')}, total {_seeds_total(wall)}; "
        f"{result['cpu']['model']}, {result['cpu']['cores']} cores."
    )
    resumed = [
        f"seed {seed} from {checkpoint}"
        for seed, checkpoint in zip(result["seeds"], result.get("resumed_from") or [], strict=False)
        if checkpoint
    ]
    if resumed:
        lines.append(
            f"Interrupted and resumed: {', '.join(resumed)}; GRPO time counts the steps kept, not those lost."
        )
    target = result.get("start_target") or "optimal"  # results before start_target was recorded
    if not result["fair_start"] and target in DISTILLED_TARGETS:
        lines.append(
            f"**Distilled start:** the start imitated {DISTILLED_TARGETS[target]} of training scenarios "
            f"(`sft_target: {target}`), so its own score is distillation's; GRPO's claim is after − start on "
            "these held-out scenarios, whose GPUs and models training never showed."
        )
    elif not result["fair_start"]:
        lines.append(
            f"**Not a learning claim:** the start imitated {UNFAIR_START_TARGETS.get(target, target)} "
            f"(`sft_target: {target}`), so what GRPO adds cannot be told from what the warm start copied."
        )
    if result.get("scenario_fingerprint"):
        lines.append(
            f"Scenario fingerprint `{result['scenario_fingerprint']}` (`--fingerprint` prints today's)."
        )
    lines.append(f"Command: `{result['command']}`")
    return "\n".join(lines)


def _seconds_sum(wall: dict, *keys: str) -> str:
    values = [wall.get(key) for key in keys]
    return "n/a" if any(value is None for value in values) else f"{sum(values):.0f} s"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
