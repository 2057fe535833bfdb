"""Speed benchmark of the Agentic Kernel and the reward; prints one JSON object measured in one run.

    python -m benchmarks.kernel.speed --json            # full run (~1-2 minutes on 2 cores)
    python -m benchmarks.kernel.speed --json --quick    # smaller sizes, for a smoke test

Reported (all rates per second, on one core, in this process):
- ``json_loads_plans_per_s``: ``json.loads`` of the plans' JSON text, the reference rate.
- ``kernel_plans_per_s``: the batched kernel (``simulate`` + ``job_values`` + per-plan sums) on plans already
  encoded as arrays; ``kernel_vs_json_loads`` is the ratio (target ≥ 8).
- ``evaluate_batch_plans_per_s``: ``evaluate_batch`` end to end from JSON text (strict msgspec decoding,
  encoding, kernel, building ``Evaluation`` objects); ``score_batch_plans_per_s`` the same without objects.
  Both take the plans' scenarios already solved (``SolvedScenario`` per plan), as the reward path does.
- ``evaluate_p50_us``/``evaluate_p99_us``: one ``evaluate`` call against a solved scenario.
- ``solve_ms``: per tier, p50 and max of ``solve`` of a scenario (every solve is cold: nothing is cached
  below ``fleet_rl/solved_scenarios.py``; target: hard p50 ≤ 50 ms).
- ``distinct_optimal_plans``: distinct optimal (GPU split, TP, precision maps) over 60 scenarios.
- ``reward``: the TRL reward ``rewards.fleet_reward`` end to end on realistic GRPO batches (``reward_run``):
  ``completions_per_call`` = 128 completions per call (16 scenarios × 8 completions, drawn from a pool of 48
  medium/hard/multiagent scenarios; multiagent rows carry ``agent``/``given_plan`` columns and answer one
  job's part). Completions mix a ```json fence after a sentence of prose, ``<think>…</think>`` then bare or
  fenced JSON, bare JSON, optimal and perturbed plans in three JSON layouts, and about 23 % failures
  (wrong-case enums, truncated JSON, prose only, two plans); one call in four gets TRL conversational
  message lists. Every timed call gets new completions as new string objects (as in training, where each
  step brings new completions), and nothing is reused between calls but the cache of solved scenarios: an
  untimed pass first solves every scenario of the pool into it (in training, a scenario's first use costs
  its cold solve, ``solve_ms``). ``reward_completions_per_s`` and
  ``reward_us_per_completion`` are the reward's rate (best of two passes); the two measurements alternate
  every 16 calls, so both see the same load on the machine. The baseline ``json_loads_per_s`` is
  ``json.loads`` of **only the JSON payload** each completion contains (the plan text exactly as embedded,
  without its prose, fence or reasoning, which ``json.loads`` cannot parse; a truncated payload raises and
  is caught; prose-only answers have none; ``json_payloads`` counts them), so ``reward_vs_json_loads``
  (target ≥ 0.5) compares extracting, validating, simulating and scoring a completion with merely parsing
  its JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import numpy as np

from benchmarks.machine import cpu_model
from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import evaluate, evaluate_batch, solve
from fleet_rl.kernel.batch_scoring import score_batch
from fleet_rl.kernel.simulate import job_values, simulate
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.multiagent import agent_request, own_part
from fleet_rl.plan_schema import MICRO_BATCH_SIZES
from fleet_rl.scenario_generator import TASKS, make_scenario


def perturbed_plan(optimal: dict, rng: random.Random) -> dict:
    """A realistic LLM answer: the optimal plan with a few fields changed (may OOM or be unstable)."""
    jobs = json.loads(json.dumps(optimal["jobs"]))
    for job in jobs:
        if rng.random() < 0.5:
            job["precision"][rng.choice(MODULE_GROUPS)] = rng.choice(PRECISIONS)
        if rng.random() < 0.3 and "micro_batch_size" in job:
            job["micro_batch_size"] = rng.choice(MICRO_BATCH_SIZES)
        if rng.random() < 0.2:
            job["gpus"] = max(0, job["gpus"] + rng.choice((-1, 1)))  # may break TP divisibility
    return {"jobs": jobs}


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _best_of(repeats: int, fn) -> float:
    """Smallest wall time of ``repeats`` runs (the least disturbed by other work on the machine)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


_PROSE = (
    "Here is the plan for the cluster.",
    "Serving gets the fast formats, the fine-tune gets the remaining GPUs:",
    "This split follows priority and memory; each job fits on its GPUs.",
    "Final answer:",
)
_THOUGHTS = (
    "The serve job is memory-bound, so its weights and KV cache at 8 bits halve the bytes streamed per step.",
    "Training needs 16 bytes per parameter of Adam state divided by tensor parallelism, plus activations.",
    "With activation checkpointing the activations shrink to about 2 x seq_len x micro_batch x hidden.",
    "Norms must stay at 16 bits or more, and fp8 is only safe for attention and mlp GEMMs in training.",
    "The objective takes a square root of normalised throughput, so sharing GPUs beats giving them away.",
    "Tensor parallelism must divide the GPU count and the attention heads; all-reduces cost time.",
)
# Completion layouts and their weights (a policy partway through training: mostly plans, a few failures).
_KINDS = (
    ("fence_after_prose", 35),
    ("think_then_bare", 20),
    ("think_then_fence", 12),
    ("bare", 10),
    ("schema_error", 8),
    ("truncated", 7),
    ("prose_only", 5),
    ("two_plans", 3),
)


def _plan_json(plan: dict, rng: random.Random) -> str:
    """A plan as an LLM lays it out: indented, default ``json.dumps`` spacing, or compact."""
    layout = rng.random()
    if layout < 0.4:
        return json.dumps(plan, indent=2)
    if layout < 0.7:
        return json.dumps(plan)
    return json.dumps(plan, separators=(",", ":"))


def _thought(rng: random.Random) -> str:
    return " ".join(rng.sample(_THOUGHTS, rng.randint(2, 5)))


def make_completion(plan: dict, rng: random.Random) -> tuple[str, list[str]]:
    """(completion text, the JSON payloads it contains): one realistic answer built around ``plan``."""
    kind = rng.choices([k for k, _ in _KINDS], weights=[w for _, w in _KINDS])[0]
    payload = _plan_json(plan, rng)
    prose = rng.choice(_PROSE)
    if kind == "schema_error":  # a wrong-case enum: decodes, fails the schema
        payload = payload.replace('"bf16"', '"BF16"', 1).replace('"fp8"', '"FP8"', 1)
        kind = "fence_after_prose"
    if kind == "fence_after_prose":
        return f"{prose}\n```json\n{payload}\n```", [payload]
    if kind == "think_then_bare":
        return f"<think>\n{_thought(rng)}\n</think>\n{payload}", [payload]
    if kind == "think_then_fence":
        return f"<think>\n{_thought(rng)}\n</think>\n{prose}\n```json\n{payload}\n```", [payload]
    if kind == "bare":
        return payload, [payload]
    if kind == "truncated":  # generation stopped mid-object (max_completion_length)
        cut = payload[: rng.randrange(1, len(payload))]
        return f"<think>\n{_thought(rng)}\n</think>\n{prose}\n```json\n{cut}", [cut]
    if kind == "prose_only":
        return f"<think>\n{_thought(rng)}\n</think>\n{_thought(rng)}", []
    other = _plan_json(perturbed_plan(plan, rng), rng)  # two_plans: hedging, scored as malformed
    return f"Option A:\n```json\n{payload}\n```\nOption B:\n```json\n{other}\n```", [payload, other]


def reward_batches(
    num_batches: int, seed: int = 0, groups: int = 16, group_size: int = 8
) -> tuple[list[tuple[list, list[str], dict]], list[list[str]], int]:
    """``num_batches`` TRL reward calls, each ``(completions, scenario column, kwargs)`` with
    ``groups × group_size`` completions; each call's JSON payloads; and the number of distinct scenarios.

    Scenarios come from a pool of 48 (medium, hard, multiagent; solved here, before any timing); each batch
    draws its ``groups`` scenarios from the pool and writes new completions for them."""
    rng = random.Random(seed)
    pool = []
    for task in ("medium", "hard", "multiagent"):
        for s in range(16):
            scenario = make_scenario(task, 100 + s)
            optimal = solve_scenario(scenario).optimal_plan
            if task == "multiagent":
                agent, given = agent_request(scenario, 100 + s)
                pool.append((scenario.to_json(), own_part(optimal, agent), agent, json.dumps(given)))
            else:
                pool.append((scenario.to_json(), optimal, None, None))
    batches, payloads = [], []
    for b in range(num_batches):
        completions, scenario_column, agents, given_column = [], [], [], []
        payloads.append([])
        for scenario_json, optimal, agent, given in rng.sample(pool, groups):
            for _ in range(group_size):
                plan = optimal if rng.random() < 0.2 else perturbed_plan(optimal, rng)
                text, found = make_completion(plan, rng)
                payloads[-1].extend(found)
                completions.append(text)
                scenario_column.append(scenario_json)
                agents.append(agent)
                given_column.append(given)
        if b % 4 == 3:  # a conversational dataset: TRL passes message lists
            completions = [[{"role": "assistant", "content": text}] for text in completions]
        batches.append((completions, scenario_column, {"agent": agents, "given_plan": given_column}))
    return batches, payloads, len(pool)


def _copy(value):
    """A new object equal to ``value`` (strings get a new, unhashed copy, as TRL's columns would)."""
    if isinstance(value, str):
        return value.encode().decode()
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    return value


def _fresh(batches: list) -> list:
    return [(_copy(c), _copy(s), _copy(kwargs)) for c, s, kwargs in batches]


def reward_run(num_batches: int, seed: int = 0) -> dict:
    """The ``reward`` section: ``fleet_reward`` per completion vs ``json.loads`` of the JSON payloads."""
    from rewards import fleet_reward

    if num_batches < 1:
        raise ValueError(f"the reward benchmark needs at least 1 call, got {num_batches}")
    batches, payloads, pool_size = reward_batches(num_batches, seed)

    def timed_run(chunk: int = 16) -> tuple[float, float]:
        """(seconds in fleet_reward, seconds in json.loads) over all calls, alternating every ``chunk``
        calls, so both see the same load on the machine."""
        calls = _fresh(batches)  # new string objects (no hash cached by a previous run), outside the timing
        reward_s = loads_s = 0.0
        for first in range(0, len(calls), chunk):
            start = time.perf_counter()
            for completions, scenario_column, kwargs in calls[first : first + chunk]:
                fleet_reward(completions, scenario_column, **kwargs)
            middle = time.perf_counter()
            for call_payloads in payloads[first : first + chunk]:
                for payload in call_payloads:
                    try:
                        json.loads(payload)
                    except ValueError:
                        pass
            reward_s += middle - start
            loads_s += time.perf_counter() - middle
        return reward_s, loads_s

    # An untimed run first: every scenario of the pool solved into the cache of solved scenarios (by its
    # JSON text). Then the best of two timed runs.
    timed_run()
    runs = [timed_run() for _ in range(2)]
    reward_s, loads_s = min(r for r, _ in runs), min(loads for _, loads in runs)
    completions = sum(len(batch[0]) for batch in batches)
    reward_rate = _rate(completions, reward_s)
    num_payloads = sum(map(len, payloads))
    loads_rate = _rate(num_payloads, loads_s)
    return {
        "completions": completions,
        "completions_per_call": len(batches[0][0]),
        "scenario_pool": pool_size,
        "mean_completion_chars": round(
            sum(len(c if isinstance(c, str) else c[0]["content"]) for b in batches for c in b[0])
            / completions,
            1,
        ),
        "json_payloads": num_payloads,
        "reward_completions_per_s": round(reward_rate),
        "reward_us_per_completion": round(1e6 / reward_rate, 2),
        "json_loads_per_s": round(loads_rate),
        "json_loads_of": "the JSON payload of each completion only (no prose, fence or think text)",
        "reward_vs_json_loads": round(reward_rate / loads_rate, 3),
    }


def run(num_plans: int, solve_seeds: int, single_calls: int, reward_calls: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    scenarios = [make_scenario(task, s) for task in ("medium", "hard", "multiagent") for s in range(12)]
    optimal = [solve(scenario).plan for scenario in scenarios]
    pairs = []
    while len(pairs) < num_plans:
        k = rng.randrange(len(scenarios))
        plan = optimal[k] if rng.random() < 0.2 else perturbed_plan(optimal[k], rng)
        pairs.append((scenarios[k], plan))
    texts = [json.dumps(plan) for _, plan in pairs]
    batch_scenarios = [scenario for scenario, _ in pairs]

    def loads_all():
        for text in texts:
            json.loads(text)

    json_s = _best_of(3, loads_all)
    solved_by_scenario = {scenario: solve_scenario(scenario) for scenario in scenarios}
    solved = [solved_by_scenario[scenario] for scenario in batch_scenarios]
    scored = score_batch(solved, texts)
    distinct = {id(s): s for s in solved}
    reference = np.concatenate([s.reference_tokens_per_s for s in distinct.values()])
    sizes = np.array([s.table.num_jobs for s in solved])
    plan_of_row = np.repeat(np.arange(len(sizes)), sizes)

    def kernel():
        results = simulate(scored.table, scored.rows)
        values = job_values(scored.table, scored.rows, results, reference)
        np.bincount(plan_of_row, weights=values, minlength=len(sizes))

    kernel_s = _best_of(3, kernel)
    score_s = _best_of(2, lambda: score_batch(solved, texts))
    evaluate_batch_s = _best_of(2, lambda: evaluate_batch(solved, texts))

    latencies = []
    for i in range(single_calls):
        scenario, plan = pairs[i % len(pairs)]
        solved_k = solved_by_scenario[scenario]
        start = time.perf_counter()
        evaluate(solved_k, plan)
        latencies.append((time.perf_counter() - start) * 1e6)

    solve_ms: dict[str, dict[str, float]] = {}
    signatures = set()
    for task in TASKS:
        times = []
        for s in range(solve_seeds):
            scenario = make_scenario(task, 10_000 + s)
            start = time.perf_counter()
            best = solve(scenario)
            times.append((time.perf_counter() - start) * 1e3)
        solve_ms[task] = {"p50": round(float(np.median(times)), 2), "max": round(float(np.max(times)), 2)}
    for task in ("easy", "medium", "hard"):
        for s in range(20):
            best = solve(make_scenario(task, s))
            signatures.add(
                json.dumps([(j["gpus"], j["tensor_parallel"], j["precision"]) for j in best.plan["jobs"]])
            )

    json_rate = _rate(len(texts), json_s)
    kernel_rate = _rate(len(texts), kernel_s)
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "numpy": np.__version__,
        "plans": len(texts),
        "rows": int(scored.rows.num_rows),
        "mean_plan_bytes": round(sum(map(len, texts)) / len(texts), 1),
        "json_loads_plans_per_s": round(json_rate),
        "kernel_plans_per_s": round(kernel_rate),
        "kernel_vs_json_loads": round(kernel_rate / json_rate, 2),
        "score_batch_plans_per_s": round(_rate(len(texts), score_s)),
        "score_batch_vs_json_loads": round(_rate(len(texts), score_s) / json_rate, 2),
        "evaluate_batch_plans_per_s": round(_rate(len(texts), evaluate_batch_s)),
        "evaluate_p50_us": round(float(np.percentile(latencies, 50)), 1),
        "evaluate_p99_us": round(float(np.percentile(latencies, 99)), 1),
        "solve_ms": solve_ms,
        "distinct_optimal_plans": len(signatures),
        "distinct_optimal_plans_of": 60,
        "reward": reward_run(reward_calls, seed),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (the default output)")
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke test")
    parser.add_argument("--plans", type=int, default=None, help="plans in the batch (default 200000)")
    parser.add_argument(
        "--reward-calls", type=int, default=None, help="fleet_reward calls of 128 completions (default 400)"
    )
    args = parser.parse_args(argv)
    if args.reward_calls is not None and args.reward_calls < 1:
        parser.error("--reward-calls must be at least 1")
    plans = args.plans or (5_000 if args.quick else 200_000)
    result = run(
        num_plans=plans,
        solve_seeds=3 if args.quick else 20,
        single_calls=200 if args.quick else 3000,
        reward_calls=args.reward_calls or (20 if args.quick else 400),
    )
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
