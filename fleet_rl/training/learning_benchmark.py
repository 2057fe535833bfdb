"""Learning benchmark: does GRPO improve the tiny model beyond its SFT warm start? Prints JSON.

    python -m fleet_rl.training.learning_benchmark --grpo_steps 60 --eval_scenarios 32

It runs the tiny CPU preset (``configs/tiny_cpu.yaml``; any extra flags are passed to ``train_grpo.py``),
then evaluates two policies on the same held-out scenarios with the same greedy decoding and the same
4-bit NF4 base: the SFT warm start (the GRPO starting point: LoRA at zero) and the GRPO result (warm start +
trained LoRA adapter). The headline is ``delta_percent_points``, the change in held-out mean % of the exact
optimum. A command, not a CI test: it takes minutes and its result is a measurement, not a pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from fleet_rl.bench import cpu_model

__all__ = ["main", "run"]

CONFIG = "configs/tiny_cpu.yaml"


def _evaluate(model_dir: str, args: argparse.Namespace) -> dict:
    import eval as eval_script  # the repository's eval.py: one evaluation path for users and this benchmark

    with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the benchmark's JSON
        report = eval_script.main(
            [
                "--model", model_dir, "--load_in_4bit", "true", "--tasks", *args.tasks,
                "--num_scenarios", str(args.eval_scenarios), "--prompt_style", "compact",
                "--max_new_tokens", str(args.max_new_tokens),
            ]
        )  # fmt: skip
    return {key: value for key, value in report.items() if key not in ("samples", "evaluated")}


def run(args: argparse.Namespace, train_flags: list[str]) -> dict:
    """Train with the tiny preset, evaluate the warm start and the GRPO policy, return the comparison."""
    import train_grpo

    output_dir = Path(args.output_dir)
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):
        summary = train_grpo.main(
            [
                "--config", CONFIG, "--output_dir", str(output_dir), "--max_steps", str(args.grpo_steps),
                "--save_steps", str(args.grpo_steps), "--eval_scenarios", "0", "--report_to", "none",
                "--log_completions", "false", "--disable_tqdm", "true", "--tasks", *args.tasks,
                *train_flags,
            ]
        )  # fmt: skip
    train_s = time.perf_counter() - started
    state = json.loads((output_dir / f"checkpoint-{args.grpo_steps}" / "trainer_state.json").read_text())
    grpo_s = summary["train_runtime_s"]
    after_sft = _evaluate(str(output_dir / "warm-start"), args)
    after_grpo = _evaluate(str(output_dir), args)
    rewards = [entry["reward"] for entry in state["log_history"] if "reward" in entry]
    return {
        "config": CONFIG,
        "extra_flags": train_flags,
        "tasks": args.tasks,
        "grpo_steps": args.grpo_steps,
        "eval_scenarios": args.eval_scenarios,
        "after_sft": after_sft,
        "after_grpo": after_grpo,
        "delta_percent_points": after_grpo["mean_percent_of_optimum"] - after_sft["mean_percent_of_optimum"],
        "train_reward_first_last_10_steps": [
            sum(rewards[:10]) / max(len(rewards[:10]), 1),
            sum(rewards[-10:]) / max(len(rewards[-10:]), 1),
        ],
        "wall_s": {"sft_and_grpo": train_s, "grpo": grpo_s, "sft_and_setup": train_s - grpo_s},
        "cpu": cpu_model(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grpo_steps", type=int, default=60)
    parser.add_argument("--eval_scenarios", type=int, default=32)
    parser.add_argument("--tasks", nargs="+", default=["easy"])
    parser.add_argument("--max_new_tokens", type=int, default=320)
    parser.add_argument("--output_dir", default="runs/learning_benchmark")
    parser.add_argument("--json", action="store_true", help="print only the JSON result (the default output)")
    args, train_flags = parser.parse_known_args(argv)
    print(json.dumps(run(args, train_flags), indent=2))


if __name__ == "__main__":
    main()
