"""Load benchmark of the environment server; prints one JSON object measured in one run.

    python benchmarks/server_load.py              # 1 and 16 sessions, ~30 s on 2 cores
    python benchmarks/server_load.py --quick      # fewer steps, for a smoke test
    python benchmarks/server_load.py --soak 600   # 16 sessions for 60 s warm-up + 600 s (server_soak.py)
    python benchmarks/server_load.py --ws-compression   # the server negotiates permessage-deflate (A/B)

It starts ``python -m fleet_rl.server`` in a child process on 127.0.0.1 (no web UI) and drives it from this
process with ``FleetEnv`` async clients (one WebSocket session each), at 1 session and at 16 concurrent
sessions. Each session runs single-step episodes back to back: ``reset`` (task cycling easy / medium /
hard / multiagent over a fixed pool of 24 seeds, so scenarios are solved once and then come from the
server's cache, as in a long run) and one ``step`` with the heuristic's answer or a malformed one (one in
four). Reported per level:

- ``steps_per_s``: steps completed per second of wall time, sustained over the run (resets not counted;
  ``episodes_per_s`` equals it, as every episode has one step);
- ``step_p50_ms``/``step_p99_ms``: latency of one ``step`` round trip, seen by the client;
- ``reset_p50_ms``: the same for ``reset``;
- ``server_cpu_ms_per_episode``/``client_cpu_ms_per_episode``: CPU time (user + system) the server process
  and this process spent per episode (reset and step), from ``/proc`` and ``time.process_time``. At 16
  sessions on 2 cores the server is busy all the time, so its CPU per episode sets the throughput and,
  through the wait behind other sessions, the latency; unlike those it moves little when other work
  shares the machine.

The clients and the server share the machine (the report states its cores and CPU), so on 2 cores the
figures are a floor for a server with a machine of its own. A warm-up pass first solves the pool's
scenarios in the server.

With ``--soak SECONDS`` it runs the soak instead (``benchmarks/server_soak.py``: 16 sessions on the same
pool for ``--warmup-s`` (default 60) plus SECONDS; steps, errors, p50/p99, the server's RSS after the
warm-up and at the end, and whether the soak goal was met); the report's ``machine`` section then also
holds the load average at the start and the end, since other work on the machine moves the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine import cpu_model, git_state  # noqa: E402
from benchmarks.process_memory import child_pid_with, cpu_s  # noqa: E402
from benchmarks.server_soak import run_soak  # noqa: E402
from fleet_rl.baselines import heuristic  # noqa: E402
from fleet_rl.client import FleetAction, FleetEnv  # noqa: E402
from fleet_rl.prompts import format_answer  # noqa: E402
from fleet_rl.scenario_generator import TASKS  # noqa: E402
from fleet_rl.server.subprocess_server import server_process  # noqa: E402
from fleet_rl.training.dataset import planner_answer  # noqa: E402

POOL = [(TASKS[i % len(TASKS)], i) for i in range(24)]


def _answers() -> dict[tuple[str, int], str]:
    """The heuristic's answer per pool request, computed once here (the client's work is not measured)."""
    from fleet_rl.env import FleetEnvironment

    env, answers = FleetEnvironment(), {}
    for task, seed in POOL:
        observation = env.reset(task=task, seed=seed)
        row = {
            "scenario": observation.scenario,
            "seed": seed,
            "agent": observation.agent,
            "given_plan": observation.given_plan,
        }
        answers[task, seed] = format_answer(planner_answer(heuristic, row))
    return answers


async def _session(base_url: str, index: int, steps: int, answers: dict, timings: dict) -> None:
    async with FleetEnv(base_url=base_url, message_timeout_s=120) as env:
        for k in range(steps):
            task, seed = POOL[(index * 7 + k) % len(POOL)]
            t0 = time.perf_counter()
            await env.reset(task=task, seed=seed)
            t1 = time.perf_counter()
            answer = '{"jobs": [' if k % 4 == 3 else answers[task, seed]
            await env.step(FleetAction(plan=answer))
            t2 = time.perf_counter()
            timings["reset"].append(t1 - t0)
            timings["step"].append(t2 - t1)


async def _level(base_url: str, sessions: int, steps_per_session: int, answers: dict) -> dict:
    timings = {"reset": [], "step": []}
    start = time.perf_counter()
    await asyncio.gather(
        *(_session(base_url, i, steps_per_session, answers, timings) for i in range(sessions))
    )
    wall_s = time.perf_counter() - start
    step_ms = 1000 * np.array(timings["step"])
    return {
        "sessions": sessions,
        "steps": len(step_ms),
        "wall_s": round(wall_s, 2),
        "steps_per_s": round(len(step_ms) / wall_s, 1),
        "episodes_per_s": round(len(step_ms) / wall_s, 1),
        "step_p50_ms": round(float(np.percentile(step_ms, 50)), 2),
        "step_p99_ms": round(float(np.percentile(step_ms, 99)), 2),
        "reset_p50_ms": round(float(np.percentile(1000 * np.array(timings["reset"]), 50)), 2),
    }


def _with_cpu(base_url: str, server_pid: int | None, sessions: int, steps: int, answers: dict) -> dict:
    """``_level`` plus the CPU time the server process and this (client) process spent per episode."""
    server_start, client_start = cpu_s(server_pid) if server_pid else None, time.process_time()
    level = asyncio.run(_level(base_url, sessions, steps, answers))
    server_end, client_end = cpu_s(server_pid) if server_pid else None, time.process_time()
    episodes = level["steps"]
    measured = None not in (server_start, server_end)
    level["server_cpu_ms_per_episode"] = (
        round(1000 * (server_end - server_start) / episodes, 3) if measured else None
    )
    level["client_cpu_ms_per_episode"] = round(1000 * (client_end - client_start) / episodes, 3)
    return level


def _machine() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "note": "client and server on the same machine",
        "git": git_state(),
    }


def _server_args(ws_compression: bool) -> tuple[str, ...]:
    return ("--max-sessions", "32") + (("--ws-compression",) if ws_compression else ())


def _soak_report(soak_s: float, warmup_s: float, answers: dict, ws_compression: bool) -> dict:
    machine = _machine()  # the code's commit as the soak starts (the tree may be edited while it runs)
    load_start = [round(load, 2) for load in os.getloadavg()]
    with server_process(extra_args=_server_args(ws_compression)) as base_url:
        port = base_url.rsplit(":", 1)[1]
        server_pid = child_pid_with("fleet_rl.server", "--port", port)
        asyncio.run(_level(base_url, 4, len(POOL) // 4 + 1, answers))  # solve the pool once
        sections = run_soak(base_url, POOL, answers, soak_s=soak_s, warmup_s=warmup_s, server_pid=server_pid)
    machine = {
        **machine,
        "load_average_1_5_15_min_start": load_start,
        "load_average_1_5_15_min_end": [round(load, 2) for load in os.getloadavg()],
    }
    return {"benchmark": "server_soak", "machine": machine, "ws_compression": ws_compression, **sections}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    parser.add_argument(
        "--soak", type=float, metavar="SECONDS", help="run the soak for SECONDS after the warm-up instead"
    )
    parser.add_argument("--warmup-s", type=float, default=60.0, help="the soak's warm-up (default 60)")
    parser.add_argument(
        "--ws-compression", action="store_true", help="server with permessage-deflate on (A/B)"
    )
    args = parser.parse_args(argv)
    if args.soak is not None and (args.soak <= 0 or args.warmup_s < 0):
        parser.error("--soak must be > 0 and --warmup-s >= 0")
    answers = _answers()
    if args.soak is not None:
        print(json.dumps(_soak_report(args.soak, args.warmup_s, answers, args.ws_compression), indent=2))
        return
    single_steps, multi_steps = (40, 5) if args.quick else (3000, 300)
    with server_process(extra_args=_server_args(args.ws_compression)) as base_url:
        server_pid = child_pid_with("fleet_rl.server", "--port", base_url.rsplit(":", 1)[1])
        asyncio.run(_level(base_url, 4, len(POOL) // 4 + 1, answers))  # warm-up: solve the pool once
        levels = [
            _with_cpu(base_url, server_pid, 1, single_steps, answers),
            _with_cpu(base_url, server_pid, 16, multi_steps, answers),
        ]
    report = {
        "benchmark": "server_load",
        "machine": _machine(),
        "ws_compression": args.ws_compression,
        "levels": levels,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
