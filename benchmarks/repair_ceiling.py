"""How far repairs from the kernel's verdict take a trained policy's own held-out answers; JSON.

    python benchmarks/repair_ceiling.py runs/learning/NAME/seed-0/learning_seed.json   # the final policy
    python benchmarks/repair_ceiling.py runs/learning/NAME/seed-*/learning_seed.json --checkpoint 30

Issue #43's training recipe repairs a share of the sampled answers (``explore_repair_rate``,
``fleet_rl/training/plan_repairs.py``) and trains on the repaired text, so the most the policy can learn
from them is to write the repairs itself. This takes the greedy answers a learning-benchmark seed gave its
96 held-out scenarios (``completions`` of ``after``, ``start`` or ``checkpoints[STEP]`` in the seed's
``learning_seed.json``, which ``benchmarks/learning.py`` writes) and scores them as answered and after
each kind of repair: the crashed jobs alone (``repair``), also the jobs the answer leaves out
(``place_omitted``), also the jobs under their floors (``too_slow``), and both. Each kind is scored once
with one random repair per answer (seeded by the scenario's index) and once with the best of ``--draws``
by ``fleet_reward`` (``plan_repairs.best_repair``, ``explore_repair_draws``), the kept answer being the
original where no repair applies. The best-of figure is a ceiling for a policy that learned that repair
perfectly, not a claim that it will. Deterministic: the same answers and arguments print the same figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the packages, when run as `python benchmarks/repair_ceiling.py`
    sys.path.insert(0, str(REPO))

from benchmarks.learning_evaluate import eval_rows  # noqa: E402
from benchmarks.machine import git_state  # noqa: E402
from fleet_rl.training.heldout import summarise  # noqa: E402
from fleet_rl.training.plan_repairs import best_repair  # noqa: E402
from rewards import fleet_reward  # noqa: E402

REPAIRS = {  # name: best_repair's options
    "repair": {},
    "repair_place_omitted": {"place_omitted": True},
    "repair_too_slow": {"too_slow": True},
    "repair_place_omitted_too_slow": {"place_omitted": True, "too_slow": True},
}
METRICS = (
    "mean_percent_of_optimum",
    "feasible_rate",
    "oom_rate",
    "unsupported_rate",
    "too_slow_rate",
    "placed_job_share",
    "mean_fleet_reward",
)


def seed_answers(seed_json: dict, checkpoint: int | None, policy: str) -> list[str]:
    """The held-out answers of ``policy`` (``after`` or ``start``), or of ``checkpoints[checkpoint]``."""
    evaluation = (
        seed_json[policy] if checkpoint is None else seed_json.get("checkpoints", {}).get(str(checkpoint))
    )
    if evaluation is None or "completions" not in evaluation:
        where = policy if checkpoint is None else f"checkpoints[{checkpoint}]"
        raise SystemExit(
            f"no held-out answers at {where}: run benchmarks/learning.py with --reuse"
            + (f" --eval_checkpoints {checkpoint}" if checkpoint is not None else "")
            + " at this commit (evaluations keep their completions since a37a22c)"
        )
    return evaluation["completions"]


def repaired_answers(rows: list[dict], answers: list[str], draws: int, options: dict) -> list[str]:
    """Each answer repaired (the best of ``draws`` by fleet_reward), or as answered where nothing applies."""
    kept = []
    for index, (row, answer) in enumerate(zip(rows, answers, strict=True)):
        rng = random.Random(f"repair_ceiling/{index}")
        repair = best_repair(answer, row["scenario"], rng, fleet_reward, draws=draws, **options)
        kept.append(answer if repair is None else repair[0])
    return kept


def scores(rows: list[dict], answers: list[str]) -> dict:
    summary = summarise(rows, answers)
    return {name: round(summary[name], 4) for name in METRICS}


def ceiling(seed_json: dict, checkpoint: int | None, policy: str, draws: int) -> dict:
    rows = eval_rows(seed_json["fingerprint"]["settings"])
    answers = seed_answers(seed_json, checkpoint, policy)
    return {
        "seed": seed_json.get("seed"),
        "answers_sha256": hashlib.sha256(json.dumps(answers).encode()).hexdigest()[:16],
        "as_answered": scores(rows, answers),
        **{
            name: {
                "one_draw": scores(rows, repaired_answers(rows, answers, 1, options)),
                f"best_of_{draws}": scores(rows, repaired_answers(rows, answers, draws, options)),
            }
            for name, options in REPAIRS.items()
        },
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "seed_json", nargs="+", type=Path, help="learning_seed.json files of benchmarks/learning.py"
    )
    parser.add_argument(
        "--checkpoint", type=int, help="the answers of checkpoints[STEP] (--eval_checkpoints)"
    )
    parser.add_argument("--policy", choices=("after", "start"), default="after", help="without --checkpoint")
    parser.add_argument(
        "--draws", type=int, default=8, help="repairs drawn per answer for the best-of figure"
    )
    args = parser.parse_args(argv)
    seeds = [json.loads(path.read_text()) for path in args.seed_json]
    fingerprints = {seed["scenario_fingerprint"] for seed in seeds}
    if len(fingerprints) != 1:
        raise SystemExit(
            f"the seeds answered different held-out scenarios: fingerprints {sorted(fingerprints)}"
        )
    result = {
        "benchmark": "repair_ceiling",
        "scenario_fingerprint": fingerprints.pop(),
        "answers": args.policy if args.checkpoint is None else f"checkpoint-{args.checkpoint}",
        "draws": args.draws,
        "sources": [str(path) for path in args.seed_json],
        **git_state(),
        "per_seed": [ceiling(seed, args.checkpoint, args.policy, args.draws) for seed in seeds],
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
