"""One report for several policies on the same held-out scenarios: JSON, a Markdown table and a plot.

    python eval.py --policies outputs/tiny_cpu,heuristic,even_bf16,random,optimal --tasks easy medium \\
        --num_scenarios 32 --output_dir outputs/reports/tiny

``eval.py`` evaluates each policy (a baseline by name, or a model / checkpoint directory) on the same
held-out rows (``split="eval"``, one ``dataset_seed``) and hands the summaries here. ``write_report`` writes

- ``report.json``: ``{"scenarios": {"split", "tasks", "num_scenarios", "dataset_seed"}, "policies":
  [{"name", "kind" ("baseline", "model" or "endpoint"), "summary"}]}``. Each summary is what
  ``fleet_rl.training.heldout.summarise`` returns, overall and ``per_task``: ``num_scenarios``,
  ``mean_percent_of_optimum`` (IRD plans count 0), ``mean_kernel_percent_of_optimum``,
  ``mean_fleet_reward``, ``valid_plan_rate``, ``feasible_rate``, ``crash_rate`` and ``oom_rate`` /
  ``unsupported_rate`` / ``unstable_rate``, ``ird_rate``, ``placed_job_share`` (the share of the jobs asked
  for that the answers place, ``fleet_rl/training/job_placement.py``), and for model policies
  ``mean_completion_tokens`` (plus a few ``samples``); an endpoint policy (``openai:<model>``,
  ``fleet_rl/endpoint_policy.py``) adds ``usage`` (this run's requests, failed_requests, prompt_tokens,
  completion_tokens, and ``reused_answers``: prompts answered from an earlier run's answers file under the
  same settings, not asked again), ``errors`` (its first failed items) and ``endpoint`` (model, base_url,
  temperature, max_tokens; never the key). A policy that failed has ``"error"`` (the message) instead of a
  summary;
- ``report.md``: the table a person reads, % of optimum per tier and the rates, policies in the order given,
  and under it the endpoint policies' ``usage`` (this run's requests, failed requests, prompt and completion
  tokens, and the answers reused from an earlier run);
- ``percent_of_optimum.png``: % of optimum by policy and tier (grouped bars);
- with a training run (``--run DIR``): ``report.json``'s ``"run"``, ``{"dir", "global_step", "curves":
  {series: [[step, value], ...]}}`` (``fleet_rl/run_curves.py``: ``reward``, ``rewards/<name>/mean``,
  ``kernel/percent_of_optimum``, ``heldout/<metric>``), a line under the table and ``training_curves.png``.

Everything in it is computed from the summaries: the same scenarios and policies give the same report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from fleet_rl.run_curves import plot_run_curves, run_curves, trainer_state

__all__ = ["REPORT_FILES", "RUN_FILE", "markdown", "plot_percent_of_optimum", "write_report"]

REPORT_FILES = ("report.json", "report.md", "percent_of_optimum.png")
RUN_FILE = "training_curves.png"
_RATES = (
    ("valid plan", "valid_plan_rate"),
    ("feasible", "feasible_rate"),
    ("crash", "crash_rate"),
    ("IRD", "ird_rate"),
    ("jobs placed", "placed_job_share"),
)


def _tiers(report: dict) -> list[str]:
    return list(report["scenarios"]["tasks"])


def markdown(report: dict) -> str:
    """The report as Markdown: one row per policy, % of optimum overall and per tier, then the rates."""
    tiers = _tiers(report)
    scenarios = report["scenarios"]
    header = ["policy", "% of optimum", *tiers, "mean reward", *(name for name, _ in _RATES), "tokens"]
    lines = [
        f"# Held-out evaluation: {scenarios['num_scenarios']} scenarios ({', '.join(tiers)}), "
        f"split {scenarios['split']}, dataset_seed {scenarios['dataset_seed']}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for policy in report["policies"]:
        if "error" in policy:
            lines.append(f"| `{policy['name']}` | failed: {policy['error'].replace('|', '/')} |")
            continue
        summary = policy["summary"]
        per_task = summary.get("per_task", {})
        cells = [f"`{policy['name']}`", f"{summary['mean_percent_of_optimum']:.1f}"]
        cells += [
            f"{per_task[tier]['mean_percent_of_optimum']:.1f}" if tier in per_task else "–" for tier in tiers
        ]
        cells.append(f"{summary['mean_fleet_reward']:.3f}")
        cells += [f"{summary[key]:.2f}" for _, key in _RATES]
        tokens = summary.get("mean_completion_tokens")
        cells.append("–" if tokens is None else f"{tokens:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "% of optimum counts degenerate (IRD) answers as 0; crash: some job the answer places fails (oom, "
        "unsupported format or unstable numerics); tokens: mean completion length of a model policy.",
    ]
    usage = [_usage_line(policy) for policy in report["policies"] if "usage" in policy.get("summary", {})]
    if usage:
        lines += ["", "Endpoint usage of this run (tokens as the endpoint reported them):", "", *usage]
    if "run" in report:
        lines += ["", _run_line(report["run"])]
    return "\n".join(lines) + "\n"


def _usage_line(policy: dict) -> str:
    usage = policy["summary"]["usage"]
    return (
        f"- `{policy['name']}`: {usage['requests']} requests, {usage['failed_requests']} failed; "
        f"{usage['prompt_tokens']} prompt tokens, {usage['completion_tokens']} completion tokens; "
        f"{usage.get('reused_answers', 0)} answers reused from an earlier run"
    )


def _run_line(run: dict) -> str:
    curves = run["curves"]
    line = f"Training run `{run['dir']}`: {run['global_step']} GRPO steps"
    reward = curves.get("reward", [])
    if reward:
        line += f"; mean reward {reward[0][1]:.3f} at step {reward[0][0]:.0f} → {reward[-1][1]:.3f} at step "
        line += f"{reward[-1][0]:.0f}"
    heldout = curves.get("heldout/mean_percent_of_optimum", [])
    if heldout:
        line += f"; held-out % of optimum at step {heldout[-1][0]:.0f}: {heldout[-1][1]:.1f}"
    return line + f" ({RUN_FILE})."


def plot_percent_of_optimum(report: dict, path: str | Path) -> Path:
    """Grouped bars: % of optimum per tier (and overall), one bar per policy."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    tiers = [*_tiers(report), "all"]
    policies = [policy for policy in report["policies"] if "summary" in policy]
    width = 0.8 / max(len(policies), 1)
    figure, axes = plt.subplots(figsize=(max(6.0, 1.4 * len(tiers) + 0.3 * len(policies)), 4.0))
    for k, policy in enumerate(policies):
        summary = policy["summary"]
        per_task = summary.get("per_task", {})
        values = [per_task.get(tier, {}).get("mean_percent_of_optimum", 0.0) for tier in tiers[:-1]]
        values.append(summary["mean_percent_of_optimum"])
        positions = [i + (k - (len(policies) - 1) / 2) * width for i in range(len(tiers))]
        axes.bar(positions, values, width, label=policy["name"])
    axes.set_xticks(range(len(tiers)), tiers)
    axes.set_ylim(0, 105)
    axes.set_ylabel("% of the exact optimum")
    axes.set_title(f"Held-out scenarios ({report['scenarios']['num_scenarios']})")
    axes.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def write_report(
    policies: Sequence[dict],
    *,
    tasks: Sequence[str],
    num_scenarios: int,
    dataset_seed: int,
    output_dir,
    run_dir=None,
) -> dict:
    """Write ``REPORT_FILES`` (and ``RUN_FILE`` with a ``run_dir``) into ``output_dir`` (created); return the
    report. ``policies``: ``{"name", "kind", "summary"}`` each, in the order to show them."""
    report = {
        "scenarios": {
            "split": "eval",
            "tasks": list(tasks),
            "num_scenarios": num_scenarios,
            "dataset_seed": dataset_seed,
        },
        "policies": list(policies),
    }
    directory = Path(output_dir)
    directory.mkdir(parents=True, exist_ok=True)
    if run_dir is not None:
        state = trainer_state(run_dir)
        curves = run_curves(state.get("log_history", []))
        report["run"] = {"dir": str(run_dir), "global_step": state.get("global_step"), "curves": curves}
        plot_run_curves(curves, directory / RUN_FILE, f"Training run {run_dir}")
    (directory / "report.json").write_text(json.dumps(report, indent=2))
    (directory / "report.md").write_text(markdown(report))
    plot_percent_of_optimum(report, directory / "percent_of_optimum.png")
    return report
