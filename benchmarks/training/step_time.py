"""Where a GRPO step's time goes: generation, rewards, the forward pass, backward, optimizer; prints JSON.

    python -m benchmarks.training.step_time   # SmolLM2 preset, 3 steps, no warm start
    python -m benchmarks.training.step_time --steps 3 --prompt_style facts --dtype bfloat16 --bf16 true
    python -m benchmarks.training.step_time --model_name_or_path runs/learning/start/random_feasible-seed0

A GRPO step on a CPU is minutes, and what would make it cheaper depends on where they go: shorter answers
and bf16 matmuls speed up generation, a shorter prompt speeds up everything, fewer answers per prompt cut
both generation and backward. This runs ``train_grpo.py`` (the preset plus any flags this script does not
know; no warm start, no held-out evaluation, no checkpoints, nothing reported) and times, per optimizer
step, TRL's own phases by wrapping ``GRPOTrainer``'s methods:

- ``generate``: ``_generate`` (sampling every answer, and the repairs of ``explore_repair_rate``);
- ``rewards``: ``_calculate_rewards`` (the kernel scoring the answers);
- ``prepare_other``: the rest of ``_generate_and_score_completions`` (tokenizing, padding, advantages);
- ``loss_forward``: ``compute_loss`` (the policy's forward pass over prompt + answer, and the loss; a
  self-imitation replay included);
- ``backward``: the rest of ``training_step`` (``loss.backward()``);
- ``optimizer_and_other``: the rest of the step (gradient clipping, the optimizer, the scheduler, logging).

Each phase is timed once per outermost call (``FleetGRPOTrainer`` overrides some and calls ``super()``).
The JSON has every step's phases and, over the steps after the first (which also warms caches), their mean
in seconds and as a share of the step, and the process's peak resident memory: over the run, while loading
(before the first step) and in each step (``rss_peak_gb``), read every 20 ms by
``benchmarks.process_memory.PeakRss``, and what the process holds at each step's end (``rss_end_gb``: with
``--release_freed_memory false`` the high-water mark stays). ``--share_prompt false`` times TRL's own path,
the prompt run with every answer (fleet_rl/training/shared_prompt.py). Measure alone on the machine:
another process on the cores changes every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict

DEFAULT_CONFIG = "configs/smollm2_cpu.yaml"
TIMED_METHODS = {  # phase name -> GRPOTrainer method
    "generate": "_generate",
    "rewards": "_calculate_rewards",
    "generate_and_score": "_generate_and_score_completions",
    "loss_forward": "compute_loss",
    "training_step": "training_step",
}
PHASES = (
    "generate",
    "rewards",
    "prepare_other",
    "loss_forward",
    "backward",
    "optimizer_and_other",
)


class MethodTimer:
    """Seconds spent in each of ``TIMED_METHODS`` since the last ``take()``, outermost calls only."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._depth: dict[str, int] = defaultdict(int)

    def wrap(self, name: str, method):
        @functools.wraps(method)
        def timed(*args, **kwargs):
            self._depth[name] += 1
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self._depth[name] -= 1
                if self._depth[name] == 0:
                    self.seconds[name] += time.perf_counter() - started

        return timed

    def take(self) -> dict[str, float]:
        taken, self.seconds = dict(self.seconds), defaultdict(float)
        return taken


def phases(step_s: float, timed: dict[str, float]) -> dict[str, float]:
    """One step's phases (``PHASES``) from its wall time and the methods' times; they add up to ``step_s``."""
    generate, rewards = timed.get("generate", 0.0), timed.get("rewards", 0.0)
    prepare = timed.get("generate_and_score", 0.0)
    loss, training = timed.get("loss_forward", 0.0), timed.get("training_step", 0.0)
    return {
        "generate": generate,
        "rewards": rewards,
        "prepare_other": max(prepare - generate - rewards, 0.0),
        "loss_forward": loss,
        "backward": max(training - prepare - loss, 0.0),
        "optimizer_and_other": max(step_s - training, 0.0),
    }


def summary(steps: list[dict]) -> dict:
    """Mean seconds and share of the step per phase over the steps after the first (all of them if one)."""
    measured = steps[1:] or steps
    mean_step = sum(step["step_s"] for step in measured) / len(measured)
    mean = {phase: sum(step["phases"][phase] for step in measured) / len(measured) for phase in PHASES}
    return {
        "steps_averaged": [step["step"] for step in measured],
        "mean_step_s": round(mean_step, 2),
        "mean_s": {phase: round(value, 2) for phase, value in mean.items()},
        "share": {phase: round(value / mean_step, 3) for phase, value in mean.items()},
    }


def _gb(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def main(argv: list[str] | None = None) -> dict:
    arguments = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="Other flags go to train_grpo.py (--prompt_style facts)."
    )
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps to time (the first is left out)")
    args, train_flags = parser.parse_known_args(arguments)
    if args.steps < 1:
        parser.error("--steps must be >= 1")

    # stdout is for the JSON alone: transformers prints a line on import when WANDB_MODE=offline
    with contextlib.redirect_stdout(sys.stderr):
        from transformers import TrainerCallback
        from trl import GRPOTrainer

        import train_grpo
    from benchmarks.machine import cpu_model, git_state
    from benchmarks.process_memory import PeakRss, rss_mb

    timer = MethodTimer()
    # every trainer class that defines a timed method (ours override some and call super(): the outermost
    # call is timed), so the phases hold whichever class train_grpo.py builds
    classes = [GRPOTrainer, *_subclasses(GRPOTrainer)]
    originals = {
        (cls, method): cls.__dict__[method]
        for cls in classes
        for method in TIMED_METHODS.values()
        if method in cls.__dict__
    }
    names = {method: name for name, method in TIMED_METHODS.items()}
    steps: list[dict] = []
    memory = PeakRss()
    loading_peak: list[float | None] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            timer.take()
            peak = memory.take()
            if not steps and not loading_peak:
                loading_peak.append(peak)
            self.started = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            step_s = time.perf_counter() - self.started
            timed = timer.take()
            peak = memory.take() or 0.0
            step = {"step": state.global_step, "step_s": step_s, "phases": phases(step_s, timed)}
            step["rss_peak_gb"] = _gb(peak)
            now_mb = rss_mb(os.getpid())  # after --release_freed_memory's callback: it runs before this one
            step["rss_end_gb"] = _gb(None if now_mb is None else now_mb / 1024)
            steps.append(step)

    with tempfile.TemporaryDirectory(prefix="step-time-") as output_dir:
        flags = [
            "--config", args.config, "--sft_steps", "0", "--eval_scenarios", "0", "--report_to", "none",
            "--save_strategy", "no", "--disable_tqdm", "true", "--log_completions", "false",
            "--output_dir", output_dir, *train_flags, "--max_steps", str(args.steps),
        ]  # fmt: skip
        for (cls, method), original in originals.items():
            setattr(cls, method, timer.wrap(names[method], original))
        try:  # the trainer prints its logs to stdout: keep stdout for the JSON alone
            with contextlib.redirect_stdout(sys.stderr), memory:
                train_grpo.main(flags, callbacks=[StepClock()])
        finally:
            for (cls, method), original in originals.items():
                setattr(cls, method, original)
    # the summary averages the unrounded times: rounding a short step's five phases first skews its shares
    step_summary = summary(steps)
    for step in steps:
        step["step_s"] = round(step["step_s"], 2)
        step["phases"] = {phase: round(value, 2) for phase, value in step["phases"].items()}
    result = {
        "command": ["python", "-m", "benchmarks.training.step_time", *arguments],
        "train_flags": flags[: flags.index("--output_dir")] + flags[flags.index("--output_dir") + 2 :],
        "threads": os.environ.get("OMP_NUM_THREADS", "all cores (OMP_NUM_THREADS unset)"),
        "cpu": cpu_model(),
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),  # Linux: KiB
        "loading_rss_peak_gb": _gb(loading_peak[0] if loading_peak else None),
        "git": git_state(),
        "steps": steps,
        "summary": step_summary,
    }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
