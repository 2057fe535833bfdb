"""Benchmark of the Agentic Kernel; prints one JSON object measured in one run.

    python -m fleet_rl.bench --json            # full run (~1-2 minutes on 2 cores)
    python -m fleet_rl.bench --json --quick    # smaller sizes, for a smoke test

Reported (all rates per second, on one core, in this process):
- ``json_loads_plans_per_s``: ``json.loads`` of the plans' JSON text, the reference rate.
- ``kernel_plans_per_s``: the batched kernel (``simulate`` + ``job_values`` + per-plan sums) on plans already
  encoded as arrays; ``kernel_vs_json_loads`` is the ratio (target ≥ 8).
- ``evaluate_batch_plans_per_s``: ``evaluate_batch`` end to end from JSON text (strict msgspec decoding,
  encoding, kernel, building ``Evaluation`` objects); ``score_batch_plans_per_s`` the same without objects.
- ``evaluate_p50_us``/``evaluate_p99_us``: one ``evaluate`` call (warm scenario cache).
- ``solve_ms``: per tier, p50 and max of ``solve`` with a cold cache (target: hard p50 ≤ 50 ms).
- ``distinct_optimal_plans``: distinct optimal (GPU split, TP, precision maps) over 60 scenarios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time

import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel import evaluate, evaluate_batch, solve
from fleet_rl.kernel.evaluate import score_batch
from fleet_rl.kernel.simulate import job_values, simulate
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.plan_schema import MICRO_BATCH_SIZES
from fleet_rl.scenario_generator import TASKS, make_scenario


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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


def run(num_plans: int, solve_seeds: int, single_calls: int, seed: int = 0) -> dict:
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
    solved = [solve_scenario(scenario) for scenario in batch_scenarios]
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
    evaluate_batch_s = _best_of(2, lambda: evaluate_batch(batch_scenarios, texts))

    latencies = []
    for i in range(single_calls):
        scenario, plan = pairs[i % len(pairs)]
        start = time.perf_counter()
        evaluate(scenario, plan)
        latencies.append((time.perf_counter() - start) * 1e6)

    solve_ms: dict[str, dict[str, float]] = {}
    signatures = set()
    for task in TASKS:
        times = []
        for s in range(solve_seeds):
            scenario = make_scenario(task, 10_000 + s)
            solve_scenario.cache_clear()
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
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (the default output)")
    parser.add_argument("--quick", action="store_true", help="small sizes for a smoke test")
    parser.add_argument("--plans", type=int, default=None, help="plans in the batch (default 200000)")
    args = parser.parse_args(argv)
    plans = args.plans or (5_000 if args.quick else 200_000)
    result = run(
        num_plans=plans, solve_seeds=3 if args.quick else 20, single_calls=200 if args.quick else 3000
    )
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
