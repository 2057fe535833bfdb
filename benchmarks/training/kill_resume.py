"""Kill-and-resume benchmark: a training run killed with SIGKILL again and again, some kills inside checkpoint
writes, resumed after each with ``--resume_from_checkpoint last``; prints one JSON object.

    python -m benchmarks.training.kill_resume    # 10 kills of a 40-step tiny run (~3 min on 2 cores)
    python -m benchmarks.training.kill_resume --kills 20 --max_steps 20 --seed 3

The run is the tiny CPU preset (``configs/tiny_cpu.yaml``: a tiny local Llama, 4-bit NF4 + LoRA, no warm
start), a checkpoint every step. Each launch is ``train_grpo.py ... --resume_from_checkpoint last`` (the
first finds no checkpoint and starts at step 0). Half the kills land at a random moment once the launch
has trained a step (``random.Random(seed)``, 0-2 s after its first logged step: generating, stepping or
saving), so that each makes progress that a kill can cost; the other half wait for a checkpoint folder to
appear without its ``trainer_state.json`` (transformers writes it last) and kill at once, inside the
save. After the kills, a last launch trains to ``max_steps``.

Reported: ``kills``, ``kills_inside_saves`` (the newest checkpoint folder was incomplete right after the
kill), ``resumes_completed`` (launches after a kill that resumed from the newest complete checkpoint and
trained on until killed again or to the end, without failing), the ``final_step``, per kill the steps
the killed process had finished, the newest complete checkpoint left and the steps lost (finished but
not kept; at most those since the last complete checkpoint, so at most 1 with a checkpoint every step),
``history_each_step_once`` (the final ``trainer_state.json`` logs steps 1..max_steps exactly once), and
``max_abs_adapter_difference`` between the final adapter and an uninterrupted run's with the same seed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import REPO
from fleet_rl.training.complete_checkpoints import checkpoint_problem, newest_complete_checkpoint

STEP_LOG = re.compile(r"^\{'loss':")  # the Trainer prints one such line per logged step (logging_steps 1)


def _command(tiny: Path, output_dir: Path, max_steps: int, seed: int, resume: bool) -> list[str]:
    return [
        sys.executable, "train_grpo.py", "--config", "configs/tiny_cpu.yaml",
        "--model_name_or_path", str(tiny), "--output_dir", str(output_dir), "--sft_steps", "0",
        "--num_prompts", "64", "--max_completion_length", "16", "--save_steps", "1",
        "--save_total_limit", "3", "--eval_scenarios", "0", "--max_steps", str(max_steps),
        "--seed", str(seed), "--report_to", "none", "--disable_tqdm", "true", "--log_completions", "false",
        "--logging_steps", "1",
        *(["--resume_from_checkpoint", "last"] if resume else []),
    ]  # fmt: skip


def _environment() -> dict[str, str]:
    return {**os.environ, "WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _step_of(checkpoint: str | None) -> int:
    return int(Path(checkpoint).name.split("-")[1]) if checkpoint else 0


def _incomplete(output_dir: Path) -> set[str]:
    """Checkpoint folders without their trainer_state.json, which transformers writes last."""
    folders = output_dir.glob("checkpoint-*")
    return {path.name for path in folders if path.is_dir() and not (path / "trainer_state.json").exists()}


def _steps_logged(log: Path) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines() if STEP_LOG.match(line))


def _kill_once(command: list[str], output_dir: Path, inside_save: bool, delay_s: float, log: Path) -> dict:
    """Launch, kill with SIGKILL (inside a save, or after ``delay_s``), and say what was left."""
    resumed_from = _step_of(newest_complete_checkpoint(output_dir)[0])
    left_by_earlier_kills = _incomplete(output_dir)  # not a save in progress
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=REPO, env=_environment(), stdout=out, stderr=subprocess.STDOUT
        )
        started, stepped_at = time.monotonic(), None
        while process.poll() is None:
            now = time.monotonic()
            if inside_save:
                if _incomplete(output_dir) - left_by_earlier_kills or now - started > 300:
                    break  # a save has begun (or none came: kill anyway)
                time.sleep(0.002)
                continue
            if stepped_at is None and _steps_logged(log):
                stepped_at = now  # the launch has trained a step: from here a kill can cost work
            if stepped_at is not None and now - stepped_at >= delay_s:
                break
            time.sleep(0.01)
        returncode = process.poll()  # None: still running, so the kill below lands
        process.send_signal(signal.SIGKILL)
        process.wait()
    finished = resumed_from + _steps_logged(log)
    checkpoints = sorted(output_dir.glob("checkpoint-*"), key=lambda path: _step_of(str(path)))
    newest = checkpoints[-1] if checkpoints else None
    kept = _step_of(newest_complete_checkpoint(output_dir)[0])
    return {
        "mode": "inside_save" if inside_save else f"random, {delay_s:.2f} s after the first step",
        "resumed_from_step": resumed_from,
        "exited_before_the_kill": returncode is not None,
        # a launch that crashed on its own (a failed resume) exits non-zero before any kill
        "ran_until_killed_or_finished": returncode is None or returncode == 0,
        "steps_finished": finished,
        "newest_complete_checkpoint_step": kept,
        "steps_lost": max(finished - kept, 0),
        "killed_inside_a_save": newest is not None and checkpoint_problem(newest) is not None,
    }


def _adapter(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "adapter_model.safetensors"))


def run(args: argparse.Namespace) -> dict:
    from fleet_rl.tiny_model import ensure_tiny_model

    work = Path(args.work_dir)
    tiny = ensure_tiny_model(work / "tiny")
    rng = random.Random(args.seed)
    started = time.perf_counter()

    reference, interrupted = work / "uninterrupted", work / "interrupted"
    for earlier in (reference, interrupted):  # a rerun starts clean, not resuming an old run
        shutil.rmtree(earlier, ignore_errors=True)
    done = subprocess.run(
        _command(tiny, reference, args.max_steps, args.seed, resume=False),
        cwd=REPO, env=_environment(), capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"kill_resume.py: the uninterrupted run failed:\n{done.stderr[-3000:]}")

    kills = []
    for k in range(args.kills):
        inside_save = k % 2 == 1
        delay_s = rng.uniform(0.0, 2.0)
        command = _command(tiny, interrupted, args.max_steps, args.seed, resume=True)
        kills.append(_kill_once(command, interrupted, inside_save, delay_s, work / f"kill-{k}.log"))
        if kills[-1]["steps_finished"] >= args.max_steps and kills[-1]["exited_before_the_kill"]:
            break
    final = subprocess.run(
        _command(tiny, interrupted, args.max_steps, args.seed, resume=True),
        cwd=REPO, env=_environment(), capture_output=True, text=True,
    )  # fmt: skip
    last, damaged = newest_complete_checkpoint(interrupted)
    state = json.loads((Path(last) / "trainer_state.json").read_text()) if last else {"log_history": []}
    logged = [entry["step"] for entry in state["log_history"] if "loss" in entry]
    adapters = (_adapter(reference), _adapter(interrupted)) if final.returncode == 0 else None
    difference = (
        max(float((adapters[0][name] - adapters[1][name]).abs().max()) for name in adapters[0])
        if adapters
        else None
    )
    return {
        "benchmark": "kill_resume",
        "kills": len(kills),
        "kills_inside_saves": sum(kill["killed_inside_a_save"] for kill in kills),
        # every launch after the first kill resumes (the final one included); completed: it trained on
        # until the next kill, or to max_steps, without failing
        "resumes": len(kills),
        "resumes_completed": sum(kill["ran_until_killed_or_finished"] for kill in kills[1:])
        + int(final.returncode == 0),
        "final_returncode": final.returncode,
        "final_step": state.get("global_step"),
        "max_steps": args.max_steps,
        "max_steps_lost_per_kill": max((kill["steps_lost"] for kill in kills), default=0),
        "history_each_step_once": logged == list(range(1, args.max_steps + 1)),
        "damaged_checkpoints_left": [Path(path).name for path, _ in damaged],
        "max_abs_adapter_difference": difference,
        "per_kill": kills,
        "seed": args.seed,
        "wall_s": round(time.perf_counter() - started, 1),
        "command": " ".join(["python", "-m", "benchmarks.training.kill_resume", *sys.argv[1:]]),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--max_steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0, help="the training seed and the kill moments' RNG")
    parser.add_argument("--work_dir", default="outputs/kill_resume")
    args = parser.parse_args(argv)
    if args.kills < 1 or args.max_steps < 2:
        parser.error("--kills must be >= 1 and --max_steps >= 2")
    result = run(args)
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
