"""Does a policy go on after its first job? P(the jobs list continues) where its greedy answer ends job one.

    python -m benchmarks.learning.list_continuation \\
        --model runs/sft_curve/optimal/warm-start-checkpoints/step-30 \\
        --scenarios 16 --tasks medium          # one JSON object on the last line

Why (issue #68): policies answered every medium scenario with its first job alone. At the token that closes
the first job's entry the answer either goes on (``},`` ...) or closes the list (``}]`` ...): one choice,
and greedy decoding takes the likelier side every time, so a probability near 0.4 on a two-job scenario
becomes "names one job" on all of them. This script answers held-out (or training) scenarios greedily
(``fleet_rl.training.heldout.generate_ids``), finds that token in each answer, and reports the probability
mass of going on among the tokens that close the entry (the 30 likeliest), per scenario and averaged by the
scenario's number of jobs. A policy that reads the job list puts it near 1 for 2-3 jobs and near 0 for one.

``targets`` (no model needed) reports, per warm-start target planner, how often the first job of its plans
takes every GPU of the cluster, on one-job and on several-job training scenarios: where that share is 100 %
and 0 %, "every GPU taken" tells a policy when to close the list without reading the job lines (so
``random_feasible`` imitators list every job), and where it is not, only the job list does (``optimal``).
"""

from __future__ import annotations

import argparse
import json

__all__ = ["continuation_probabilities", "first_entry_end", "main", "target_cues"]

CANDIDATES = 30  # the likeliest next tokens searched for the ones that close the entry


def first_entry_end(pieces: list[str]) -> int | None:
    """Index of the token that closes the first job's entry (the brace depth back at 1, the jobs list's),
    or None if the answer never closes one."""
    depth = 0
    for index, piece in enumerate(pieces):
        for char in piece:
            depth += {"{": 1, "}": -1}.get(char, 0)
            if char == "}" and depth == 1:
                return index
    return None


def continuation_probabilities(model, tokenizer, rows: list[dict], batch_size: int = 8) -> list[float | None]:
    """Per row, P(the list goes on | the entry closes) at the end of the greedy answer's first job."""
    import torch

    from fleet_rl.training.heldout import generate_ids, prompt_ids

    prompts = prompt_ids(tokenizer, [row["prompt"] for row in rows])
    answers = generate_ids(model, tokenizer, prompts, 256, batch_size)
    shares: list[float | None] = []
    for prompt, answer in zip(prompts, answers, strict=True):
        end = first_entry_end([tokenizer.decode([token]) for token in answer])
        if end is None:
            shares.append(None)
            continue
        with torch.no_grad():
            logits = model(torch.tensor([prompt + answer[:end]], device=model.device)).logits[0, -1]
        top = torch.topk(torch.softmax(logits.float(), -1), CANDIDATES)
        go_on = close = 0.0
        for probability, token in zip(top.values.tolist(), top.indices.tolist(), strict=True):
            text = tokenizer.decode([token])
            if "}" in text:
                if "," in text[text.rindex("}") + 1 :]:
                    go_on += probability
                else:
                    close += probability
        shares.append(go_on / (go_on + close) if go_on + close > 0 else None)
    return shares


def target_cues(targets: list[str], num_rows: int, dataset_seed: int = 1) -> dict:
    """Per target planner: the share of its plans whose first job takes every GPU, one job vs several."""
    from fleet_rl.scenario import Scenario
    from fleet_rl.training.dataset import scenario_rows, sft_target_plan

    cues = {}
    for target in targets:
        cues[target] = {}
        for task in ("easy", "medium"):
            rows = scenario_rows([task], num_rows, dataset_seed=dataset_seed, prompt_style="compact")
            takes_all = [
                sft_target_plan(row, target)["jobs"][0]["gpus"]
                == Scenario.from_json(row["scenario"]).cluster.count
                for row in rows
            ]
            cues[target][task] = sum(takes_all) / len(takes_all)
    return cues


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model directory (omit for --targets only)")
    parser.add_argument("--tasks", nargs="+", default=["medium"])
    parser.add_argument("--scenarios", type=int, default=16)
    parser.add_argument("--split", default="eval", choices=["train", "eval"])
    parser.add_argument("--dataset_seed", type=int, default=7, help="7: the benchmark's held-out rows")
    parser.add_argument("--prompt_style", default="sized")
    parser.add_argument("--targets", nargs="*", default=["optimal", "random_feasible"])
    parser.add_argument("--target_rows", type=int, default=100, help="training rows per tier for --targets")
    args = parser.parse_args(argv)
    report: dict = {"targets_first_job_takes_every_gpu": target_cues(args.targets, args.target_rows)}
    if args.model:
        import numpy as np
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from fleet_rl.scenario import Scenario
        from fleet_rl.training.dataset import scenario_rows

        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
        rows = scenario_rows(
            args.tasks, args.scenarios, dataset_seed=args.dataset_seed, split=args.split,
            prompt_style=args.prompt_style,
        )  # fmt: skip
        shares = continuation_probabilities(model, tokenizer, rows)
        jobs = [len(Scenario.from_json(row["scenario"]).jobs) for row in rows]
        by_jobs = {}
        for count in sorted(set(jobs)):
            found = [s for s, n in zip(shares, jobs, strict=True) if n == count and s is not None]
            by_jobs[str(count)] = {
                "scenarios": len(found),
                "mean_p_go_on": float(np.mean(found)) if found else None,
            }
        report |= {
            "model": args.model,
            "rows": {"tasks": args.tasks, "scenarios": args.scenarios, "split": args.split,
                     "dataset_seed": args.dataset_seed, "prompt_style": args.prompt_style},
            "p_go_on": shares,
            "by_job_count": by_jobs,
        }  # fmt: skip
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
