"""The main job's closing table: the policy GRPO started from and the trained one, beside two baselines,
on the same held-out scenarios, in lines a person reads at a glance in an 80-column terminal.

``train_grpo.py`` evaluates the trained policy (``eval_report.json``) and, when it trained LoRA adapters,
the policy it started from: the same model with the adapters switched off (``peft``'s
``disable_adapter()``: no second model in memory). The baselines answer the same rows
(``fleet_rl.training.heldout.evaluate_baseline``), so the four rows compare like with like. After a run
of the tiny model, one last line (``TINY_MODEL_NOTE``) says what a newcomer should read from the table.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleet_rl.training.heldout import EVAL_DATASET_SEED, evaluate_baseline

__all__ = ["TABLE_BASELINES", "TINY_MODEL_NOTE", "baseline_summaries", "before_after_table"]

TABLE_BASELINES = ("even_bf16", "heuristic")
# The tiny random-init model's score says nothing about learning (it depends on the machine's float rounding).
TINY_MODEL_NOTE = "Tiny model: the pipeline runs. Learning: python -m benchmarks.learning (SmolLM2)"
_COLUMNS = (("% optimum", "mean_percent_of_optimum", "{:9.1f}"), ("valid", "valid_plan_rate", "{:5.2f}"))
_COLUMNS += (("feasible", "feasible_rate", "{:8.2f}"), ("IRD", "ird_rate", "{:5.2f}"))


def baseline_summaries(
    tasks: Sequence[str], num_scenarios: int, *, dataset_seed: int = EVAL_DATASET_SEED
) -> dict[str, dict]:
    """``TABLE_BASELINES`` scored on the held-out rows the policy answered."""
    return {
        name: evaluate_baseline(name, num_scenarios=num_scenarios, tasks=tasks, dataset_seed=dataset_seed)
        for name in TABLE_BASELINES
    }


def before_after_table(
    summaries: dict[str, dict], *, num_scenarios: int, tasks: Sequence[str], note: str | None = None
) -> str:
    """Rows ``name: summary`` (in order) as a fixed-width table of at most 80 columns, then ``note``."""
    width = max(len(name) for name in summaries)
    header = " " * width + "".join(f"  {title:>{len(fmt.format(0))}}" for title, _, fmt in _COLUMNS)
    lines = [f"Held-out: {num_scenarios} scenarios ({', '.join(tasks)}), greedy", header]
    for name, summary in summaries.items():
        cells = "".join("  " + fmt.format(summary[key]) for _, key, fmt in _COLUMNS)
        lines.append(f"{name:<{width}}{cells}")
    if note:
        lines.append(note)
    return "\n".join(lines)
