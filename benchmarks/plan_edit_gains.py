"""What a random edit or a repair does to the template answer: how often each raises ``fleet_reward``; JSON.

    python benchmarks/plan_edit_gains.py            # the learning benchmark's 96 held-out easy + medium
    python benchmarks/plan_edit_gains.py --num_scenarios 32 --draws 4
    python benchmarks/plan_edit_gains.py --template every_job   # the end-credit runs' template

The SmolLM2 runs of issue #43 settle on one answer: the scenario's first job alone, on every GPU, at tensor
parallelism 1 in bf16. Exploration by edits (``fleet_rl/training/edit_exploration.py``) can only teach the
policy to leave it if some edits score above it. For each held-out scenario this writes that template
answer, draws ``--draws`` edits of it (``fleet_rl.training.plan_edits.edit_answer``, one seeded RNG per
scenario and draw) and reports, per edit kind, how many were drawn, the share that raised ``fleet_reward``
above the template's, the share that lowered it, and the mean change. ``repair`` does the same for
``fleet_rl.training.plan_repairs.repair_answer`` (``explore_repair_rate``: the jobs the kernel's verdict
marks failing take a ``Fits`` setting), drawn apart, and ``repair_placing`` for the same repair that also
places the jobs the answer leaves out (``explore_repair_place_omitted``, expert iteration's repairs), drawn
with the repair's seeds. ``--template every_job`` writes the template the
runs with list-end credit settle on instead: every job named, the later ones on one GPU each, the first
on the rest, tensor parallelism 1 in bf16. Deterministic: the same arguments print the same figures.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the packages, when run as `python benchmarks/plan_edit_gains.py`
    sys.path.insert(0, str(REPO))

from fleet_rl.catalog import MODULE_GROUPS  # noqa: E402
from fleet_rl.scenario import Scenario  # noqa: E402
from fleet_rl.training.dataset import scenario_rows  # noqa: E402
from fleet_rl.training.plan_edits import EDITS, edit_answer  # noqa: E402
from fleet_rl.training.plan_repairs import repair_answer  # noqa: E402
from rewards import fleet_reward  # noqa: E402

EVAL_DATASET_SEED = 7  # fleet_rl.training.heldout.EVAL_DATASET_SEED (that module imports torch)


TEMPLATES = ("first_job", "every_job")
REPAIRS = {"repair": False, "repair_placing": True}  # name: repair_answer's place_omitted


def template_answer(scenario: Scenario, template: str = "first_job") -> str:
    """The runs' template: tensor parallelism 1 in bf16 (fp16 without it); ``first_job``: the first job
    alone on every GPU; ``every_job``: every job, the later ones on one GPU each (while GPUs last), the
    first on the rest."""
    half = "bf16" if scenario.gpu.supports("bf16") else "fp16"
    jobs = scenario.jobs[:1] if template == "first_job" else scenario.jobs[: scenario.cluster.count]
    gpus = [scenario.cluster.count - (len(jobs) - 1)] + [1] * (len(jobs) - 1)
    parts = [
        {"id": job.id, "gpus": count, "tensor_parallel": 1, "precision": dict.fromkeys(MODULE_GROUPS, half)}
        for job, count in zip(jobs, gpus, strict=True)
    ]
    return "```json\n" + json.dumps({"jobs": parts}, separators=(",", ":")) + "\n```"


def edit_gains(tasks: list[str], num_scenarios: int, draws: int, template: str = "first_job") -> dict:
    """Per edit kind, ``repair`` and ``repair_placing``: ``drawn``, ``raised``, ``lowered`` (shares of the
    drawn) and ``mean_change``."""
    changes: dict[str, list[float]] = {name: [] for name in (*EDITS, *REPAIRS)}
    rows = scenario_rows(
        tasks, num_scenarios, dataset_seed=EVAL_DATASET_SEED, split="eval", prompt_style="compact"
    )
    for index, row in enumerate(rows):
        scenario = row["scenario"]
        answer = template_answer(Scenario.from_json(scenario), template)
        before = fleet_reward([answer], [scenario])[0]
        for draw in range(draws):
            edit = edit_answer(answer, scenario, random.Random(f"plan_edit_gains/{index}/{draw}"))
            if edit is not None:
                changes[edit[1]].append(fleet_reward([edit[0]], [scenario])[0] - before)
            for name, place_omitted in REPAIRS.items():
                rng = random.Random(f"plan_edit_gains/repair/{index}/{draw}")
                repair = repair_answer(answer, scenario, rng, place_omitted=place_omitted)
                if repair is not None:
                    changes[name].append(fleet_reward([repair[0]], [scenario])[0] - before)
    return {
        name: {
            "drawn": len(values),
            "raised": sum(v > 1e-9 for v in values) / len(values) if values else 0.0,
            "lowered": sum(v < -1e-9 for v in values) / len(values) if values else 0.0,
            "mean_change": sum(values) / len(values) if values else 0.0,
        }
        for name, values in changes.items()
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["easy", "medium"])
    parser.add_argument("--num_scenarios", type=int, default=96)
    parser.add_argument("--draws", type=int, default=8, help="edits (and repairs) drawn per scenario")
    parser.add_argument("--template", choices=TEMPLATES, default="first_job", help="the answer edited")
    args = parser.parse_args(argv)
    result = {
        "benchmark": "plan_edit_gains",
        "tasks": args.tasks,
        "num_scenarios": args.num_scenarios,
        "draws": args.draws,
        "template": args.template,
        "edits": edit_gains(args.tasks, args.num_scenarios, args.draws, args.template),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
