"""A training run's curves from its ``trainer_state.json``, for the evaluation report (``eval.py --run``).

TRL logs, per GRPO step, the mean reward (``reward``) and each reward function's (``rewards/<name>/mean``);
our reward pass adds the kernel's view of the step's completions (``kernel/percent_of_optimum`` ...); the
held-out evaluation at the end of ``train_grpo.py`` logs ``heldout/<metric>``. ``run_curves`` picks those
series out of the log history as ``(step, value)`` pairs; ``plot_run_curves`` draws them: rewards on the
left axis, % of optimum (training completions, and held-out points) on the right.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["plot_run_curves", "run_curves", "trainer_state"]

_PERCENT_SERIES = ("kernel/percent_of_optimum", "heldout/mean_percent_of_optimum")


def trainer_state(run_dir: str | Path) -> dict:
    """The run's ``trainer_state.json``: in the run directory, else in its latest ``checkpoint-<step>``.
    ``FileNotFoundError`` says which directory holds none."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"training run {str(run_dir)!r} is not a directory")
    candidates = [run_dir / "trainer_state.json"]
    checkpoints = [path for path in run_dir.glob("checkpoint-*") if path.name.split("-")[-1].isdigit()]
    candidates += [
        path / "trainer_state.json"
        for path in sorted(checkpoints, key=lambda path: int(path.name.split("-")[-1]), reverse=True)
    ]
    for path in candidates:
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(
        f"no trainer_state.json in {str(run_dir)!r} or its checkpoint-* directories (train_grpo.py writes "
        "one with every checkpoint: --save_steps)"
    )


def run_curves(log_history: list[dict]) -> dict[str, list[list[float]]]:
    """``{series: [[step, value], ...]}`` for the reward, each reward function's mean, the training
    completions' % of optimum and every held-out metric logged, in step order."""
    curves: dict[str, list[list[float]]] = {}
    for entry in log_history:
        step = entry.get("step")
        if step is None:
            continue
        for key, value in entry.items():
            wanted = key == "reward" or key == "kernel/percent_of_optimum" or key.startswith("heldout/")
            wanted = wanted or (key.startswith("rewards/") and key.endswith("/mean"))
            if wanted and isinstance(value, int | float):
                curves.setdefault(key, []).append([float(step), float(value)])
    return curves


def plot_run_curves(curves: dict[str, list[list[float]]], path: str | Path, title: str) -> Path:
    """Rewards per step (left axis) and % of optimum (right axis): training completions as a line, held-out
    evaluations as points."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    figure, rewards_axis = plt.subplots(figsize=(8.0, 4.0))
    percent_axis = rewards_axis.twinx()
    for name, points in curves.items():
        steps, values = [p[0] for p in points], [p[1] for p in points]
        if name in _PERCENT_SERIES:
            style = (
                {"marker": "o", "linestyle": "none"} if name.startswith("heldout/") else {"linestyle": ":"}
            )
            percent_axis.plot(steps, values, color="black", label=name, **style)
        elif name.startswith("rewards/") or name == "reward":
            width = 2.0 if name == "reward" else 1.0
            rewards_axis.plot(steps, values, linewidth=width, label=name)
    rewards_axis.set_xlabel("GRPO step")
    rewards_axis.set_ylabel("reward (group mean)")
    percent_axis.set_ylabel("% of the exact optimum")
    percent_axis.set_ylim(0, 105)
    handles = rewards_axis.get_legend_handles_labels()
    more = percent_axis.get_legend_handles_labels()
    rewards_axis.legend(handles[0] + more[0], handles[1] + more[1], fontsize="x-small", loc="upper left")
    rewards_axis.set_title(title)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
