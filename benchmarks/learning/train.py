"""Learning benchmark, training: one seed through ``train_grpo.main``, with its reward curve and its GRPO
wall time split into generation, reward and the rest (from the timings TRL's profiling takes).

A seed whose run was interrupted resumes from its last checkpoint: each checkpoint carries the GRPO time and
the profiled totals up to it (``learning_timings.json``), so a resumed seed's times count the steps it kept
and not the work lost after its last checkpoint."""

from __future__ import annotations

import collections
import contextlib
import json
import time
from pathlib import Path

from transformers import TrainerCallback

from fleet_rl.training.complete_checkpoints import newest_complete_checkpoint

__all__ = [
    "TIMINGS_FILE",
    "TimingsIntoCheckpoints",
    "checkpoint_timings",
    "reward_curve",
    "split_grpo_time",
    "start_model_path",
    "train_seed",
    "without_resume",
    "trl_profiling_totals",
]

TIMINGS_FILE = "learning_timings.json"  # in each checkpoint: {"grpo_s": ..., "profiled_s": {...}} so far


@contextlib.contextmanager
def trl_profiling_totals(earlier: dict[str, float] | None = None):
    """Sum the durations TRL's ``profiling_context`` measures (by name), while the block runs, on top of
    ``earlier`` totals (those of a resumed run's checkpoint).

    GRPOTrainer times ``transformers.generate`` (or ``vLLM.generate``), ``_calculate_rewards``,
    ``compute_loss``... with ``trl.extras.profiling.ProfilingContext`` but only reports them to wandb,
    MLflow or Trackio; this records them too, without touching the trainer."""
    totals: dict[str, float] = collections.defaultdict(float, earlier or {})
    try:
        from trl.extras.profiling import ProfilingContext
    except ImportError:  # an older TRL without it: no split
        yield totals
        return
    original = ProfilingContext._log_metrics

    def record(self, duration: float) -> None:
        totals[self.name] += duration
        original(self, duration)

    ProfilingContext._log_metrics = record
    try:
        yield totals
    finally:
        ProfilingContext._log_metrics = original


class TimingsIntoCheckpoints(TrainerCallback):
    """Write the GRPO time so far and the profiled totals into each checkpoint as it is saved."""

    def __init__(self, profiled: dict[str, float], earlier_grpo_s: float = 0.0):
        self.profiled = profiled  # the live totals of ``trl_profiling_totals``
        self.earlier_grpo_s = earlier_grpo_s
        self.began = time.perf_counter()

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_save(self, args, state, control, **kwargs):
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir() and state.is_world_process_zero:
            grpo_s = self.earlier_grpo_s + time.perf_counter() - self.began
            timings = {"grpo_s": grpo_s, "profiled_s": dict(self.profiled)}
            (checkpoint / TIMINGS_FILE).write_text(json.dumps(timings))


def checkpoint_timings(checkpoint: str | None) -> dict:
    """The timings a checkpoint carries (none for a fresh run, or a checkpoint from before they were kept)."""
    path = Path(checkpoint, TIMINGS_FILE) if checkpoint else None
    if path is None or not path.exists():
        return {"grpo_s": 0.0, "profiled_s": {}}
    return json.loads(path.read_text())


def split_grpo_time(grpo_s: float, profiled: dict[str, float]) -> dict[str, float | None]:
    """GRPO wall time as generation, reward, and the rest (forward, backward, optimizer, saves)."""
    generation = sum(
        seconds
        for name, seconds in profiled.items()
        if name.endswith((".generate", ".generate_batch", ".sync_weights"))
    )
    reward = sum(seconds for name, seconds in profiled.items() if name.endswith("._calculate_rewards"))
    if not profiled:
        return {"generation": None, "reward": None, "backward": None}
    return {"generation": generation, "reward": reward, "backward": grpo_s - generation - reward}


def reward_curve(log_history: list[dict]) -> dict[str, list]:
    """Per logged training step: ``reward`` and every ``rewards/<name>/mean`` (plus the kernel rates)."""
    entries = [entry for entry in log_history if "reward" in entry]
    keys = ["reward"] + sorted(
        {
            key
            for entry in entries
            for key in entry
            if (key.startswith("rewards/") and key.endswith("/mean")) or key.startswith("kernel/")
        }
    )
    curve: dict[str, list] = {"step": [entry.get("step") for entry in entries]}
    for key in keys:
        curve[key] = [entry.get(key) for entry in entries]
    return curve


def _final_trainer_state(output_dir: Path, global_step: int) -> dict:
    checkpoints = sorted(output_dir.glob("checkpoint-*"), key=lambda path: int(path.name.split("-")[1]))
    exact = output_dir / f"checkpoint-{global_step}" / "trainer_state.json"
    path = exact if exact.exists() else (checkpoints[-1] / "trainer_state.json" if checkpoints else None)
    if path is None or not path.exists():
        return {"log_history": [], "note": "no checkpoint saved: no trainer_state.json"}
    return json.loads(path.read_text())


def train_seed(seed: int, config: str, train_flags: list[str], output_dir: Path) -> tuple[list[str], dict]:
    """Run train_grpo.main for one seed, resuming from the last checkpoint in ``output_dir`` if there is one
    (the caller clears the directory when the seed should start afresh); return its argv and the training
    side of the seed's result."""
    import train_grpo

    argv = [
        "--config", config, *train_flags, "--seed", str(seed), "--output_dir", str(output_dir),
        "--eval_scenarios", "0", "--report_to", "none",
    ]  # fmt: skip
    checkpoint, _ = newest_complete_checkpoint(output_dir)  # a checkpoint a kill left half-written is skipped
    if checkpoint:
        argv += ["--resume_from_checkpoint", checkpoint]
    parsed = train_grpo.parse_args(argv)
    script_args, training_args, _ = parsed
    # The preset's save_steps bound what an interruption loses; the trainer also saves at the last step,
    # whose trainer_state.json holds the whole reward curve.
    earlier = checkpoint_timings(checkpoint)
    started = time.perf_counter()
    with trl_profiling_totals(earlier["profiled_s"]) as profiled:
        summary = train_grpo.main(argv, callbacks=[TimingsIntoCheckpoints(profiled, earlier["grpo_s"])])
    train_s = time.perf_counter() - started
    segment_s = float(summary["train_runtime_s"] or 0.0)  # this process's share, after any resume
    grpo_s = earlier["grpo_s"] + segment_s
    warm = {}
    marker = output_dir / "warm-start" / "warm_start.json"
    if script_args.sft_steps > 0 and marker.exists():
        warm = json.loads(marker.read_text())
    state = _final_trainer_state(output_dir, summary["global_step"])
    warm_s = float(warm.get("wall_s") or 0.0)
    return argv, {
        "global_step": summary["global_step"],
        "resumed_from": Path(checkpoint).name if checkpoint else None,
        "warm_start": warm or None,
        "reward_curve": reward_curve(state.get("log_history", [])),
        "profiled_s": dict(profiled),
        "wall_s": {
            "warm_start": warm_s,
            "grpo": grpo_s,
            **split_grpo_time(grpo_s, profiled),
            # model building and loading, dataset, final save (a resumed run's warm start is reused)
            "setup": train_s - segment_s - (0.0 if checkpoint else warm_s),
        },
    }


def without_resume(argv: list[str]) -> list[str]:
    """``argv`` less its ``--resume_from_checkpoint`` and value: what a seed's finished run is read back with
    (the checkpoint it resumed from may since have been rotated away by ``save_total_limit``)."""
    if "--resume_from_checkpoint" not in argv[:-1]:
        return list(argv)
    at = argv.index("--resume_from_checkpoint")
    return argv[:at] + argv[at + 2 :]


def start_model_path(output_dir: Path, script_args, model_args) -> str:
    """The model GRPO started from: the trained adapter's base, else the warm start or the base model."""
    adapter = output_dir / "adapter_config.json"
    if adapter.exists():
        return json.loads(adapter.read_text())["base_model_name_or_path"]
    if script_args.sft_steps > 0:
        return str(output_dir / "warm-start")
    return model_args.model_name_or_path
