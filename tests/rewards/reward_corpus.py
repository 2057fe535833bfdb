"""A deterministic corpus of reward calls, and every reward recorded for it.

``tests/rewards/test_reward_golden.py`` checks that the reward functions (``rewards.REWARD_FUNCS``) and the
scoring pass under them (``rewards.score_completions``) still give every completion of the corpus its
recorded values. The golden file pins what the rewards compute, so their code can be restructured (the
solved scenario passed explicitly instead of found through caches) without keeping an old copy in
the tests. Record it again only after a change of behaviour that is meant, such as new kernel physics (and
say so in the commit):

    python -m tests.rewards.reward_corpus --write

The corpus (``reward_calls()``, 12,096 completions in 378 calls, fixed seed): 36 scenarios (easy, medium,
hard and multiagent, 9 seeds each). Each scenario gets 336 completions, 8 per GRPO group, made by
``tests/rewards/parse_corpus.py``'s realistic answer generator from that scenario's own plans: every
baseline's plan (optimal, even_bf16, random, random_split), the prompt's worked example answer given the
scenario's job ids (the copied-example IRD rule), and for multiagent rows the agent's own part of each.
So the answers are valid, perturbed, schema-broken, truncated, wrapped in prose, fences and think blocks,
or TRL message lists. A call holds 4 groups of different scenarios (as TRL batches several prompts), with
the ``agent`` and ``given_plan`` columns of a multiagent dataset row.

Each golden line is one completion: ``[completion hash, reward of each function in REWARD_FUNCS order,
then score_completions' score, objective, progress, runs_share, cluster_fit, valid, feasible, has_plan,
ird_rule]``,
floats rounded to 12 significant digits.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

from tests.rewards.golden_file import command_line, read_lines, write_lines

GOLDEN = Path(__file__).parent / "data" / "reward_golden.jsonl.gz"
SEED = 20_261_123
TASKS = ("easy", "medium", "hard", "multiagent")
SCENARIO_SEEDS = range(9)
GROUPS_PER_SCENARIO = 42
GROUP_SIZE = 8
GROUPS_PER_CALL = 4
PLANNERS = ("even_bf16", "random", "random_split", "optimal")  # the answers' sources, fixed: not BASELINES


def _example_under(scenario) -> dict:
    """The worked example's answer with the scenario's job ids (its jobs in order, as many as both have)."""
    from fleet_rl.prompts import example_plan

    jobs = [dict(part, id=job.id) for part, job in zip(example_plan()["jobs"], scenario.jobs, strict=False)]
    return {"jobs": jobs}


def _row(task: str, seed: int) -> dict:
    """A dataset row's columns and the plans its answers are made from."""
    from fleet_rl import make_scenario
    from fleet_rl.baselines import BASELINES
    from fleet_rl.multiagent import agent_request, own_part

    scenario = make_scenario(task, seed)
    plans = [BASELINES[name](scenario, seed) for name in PLANNERS] + [_example_under(scenario)]
    agent, given = agent_request(scenario, seed) if task == "multiagent" else ("", {})
    if agent:
        plans += [own_part(plan, agent) for plan in plans]
    plans = [plan for plan in plans if plan["jobs"]]  # the answer generator damages some job of a plan
    return {
        "scenario": scenario.to_json(),
        "agent": agent,
        "given_plan": json.dumps(given, separators=(",", ":")) if given else "",
        "plans": plans,
    }


def reward_calls() -> Iterator[tuple[list, dict[str, list]]]:
    """The corpus, in a fixed order: (completions, columns) per reward call."""
    from tests.rewards.parse_corpus import _realistic

    rng = random.Random(SEED)
    rows = [_row(task, seed) for task in TASKS for seed in SCENARIO_SEEDS]
    groups = []
    for row in rows:
        for _ in range(GROUPS_PER_SCENARIO):
            groups.append((row, [_realistic(rng, row["plans"]) for _ in range(GROUP_SIZE)]))
    rng.shuffle(groups)
    for start in range(0, len(groups), GROUPS_PER_CALL):
        completions: list = []
        columns: dict[str, list] = {"scenario": [], "agent": [], "given_plan": []}
        for row, answers in groups[start : start + GROUPS_PER_CALL]:
            completions += answers
            for name, values in columns.items():
                values += [row[name]] * len(answers)
        yield completions, columns


def _rounded(value: float) -> float:
    return float(f"{value:.12g}")


def outcomes(completions: list, columns: dict[str, list]) -> list[list]:
    """Golden lines for one call (see the module docstring)."""
    from rewards import REWARD_FUNCS, score_completions
    from tests.rewards.parse_corpus import digest

    rewards = [function(completions, **columns) for function in REWARD_FUNCS.values()]
    scores = score_completions(completions, **columns)
    lines = []
    for i, completion in enumerate(completions):
        line: list = [digest(completion, 8)]
        line += [None if values[i] is None else _rounded(values[i]) for values in rewards]
        line += [_rounded(float(getattr(scores, name)[i])) for name in ("score", "objective", "progress")]
        line += [_rounded(float(scores.runs_share[i])), _rounded(float(scores.cluster_fit[i]))]
        line += [bool(getattr(scores, name)[i]) for name in ("valid", "feasible", "has_plan")]
        line += [int(scores.ird_rule[i])]
        lines.append(line)
    return lines


def read_golden() -> list[list]:
    header, outcomes = read_lines(GOLDEN)
    assert header["seed"] == SEED, "the golden file was recorded from another corpus seed"
    return outcomes


def write_golden() -> int:
    from rewards import REWARD_FUNCS

    scores = [
        *("score", "objective", "progress", "runs_share", "cluster_fit"),
        *("valid", "feasible", "has_plan", "ird_rule"),
    ]
    header = {"seed": SEED, "columns": ["completion", *REWARD_FUNCS, *scores]}
    return write_lines(GOLDEN, header, [line for call in reward_calls() for line in outcomes(*call)])


if __name__ == "__main__":
    command_line(__doc__, write_golden, GOLDEN, "rewards")
