"""Load benchmark of the environment server; prints one JSON object measured in one run.

    python -m benchmarks.server.load              # 1 and 16 sessions, ~30 s on 2 cores
    python -m benchmarks.server.load --quick      # fewer steps, for a smoke test
    python -m benchmarks.server.load --soak 600   # 16 sessions for 60 s warm-up + 600 s (soak.py)
    python -m benchmarks.server.load --ws-compression   # the server negotiates permessage-deflate (A/B)
    python -m benchmarks.server.load --silent 200 --quick  # 200 silent connections beside 16 working sessions

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

With ``--soak SECONDS`` it runs the soak instead (``benchmarks/server/soak.py``: 16 sessions on the same
pool for ``--warmup-s`` (default 60) plus SECONDS; steps, errors, p50/p99, the server's RSS after the
warm-up and at the end, and whether the soak goal was met); the report's ``machine`` section then also
holds the load average at the start and the end, since other work on the machine moves the figures.

With ``--silent N`` it measures the server's eviction of silent sessions instead (``fleet_rl/server/
eviction.py``): a server with ``--max-sessions`` (default 64) and ``--evict-silent-after-s`` (default 5 s
here, 1 s with ``--quick``; the server's own default is 30 s) serves 16 working sessions (the episodes
above, back to back; a failure counts an error and the session reconnects), first alone for a while, then
beside N silent connections opened at once. Each silent connection sends one reset and then nothing; while
the server is full and none of its sessions has been silent long enough, it is refused and tries again
after about a second, until it has held a session once; then it stays silent until the server evicts it
(close code 4408) or the run ends. Once every silent connection has held a session, a newcomer
(``FleetEnv``) asks for one, retrying every 0.25 s while refused. Reported: the working sessions' errors
and step p50/p99 alone and during the flood, how many silent connections held a session, were evicted
(with a sample close reason) or refused, the newcomer's wait for a session, and the server's RSS before the
flood, at its peak during it and after the silent connections closed; ``goal``: 0 working errors, step
p99 under 50 ms during the flood, the newcomer served within the eviction threshold plus 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import time
from dataclasses import dataclass, field

import numpy as np
import websockets

from benchmarks.machine import cpu_model, git_state
from benchmarks.process_memory import child_pid_with, cpu_s, rss_mb
from benchmarks.server.soak import run_soak
from fleet_rl.baselines import heuristic
from fleet_rl.env.client import FleetAction, FleetEnv, ServerFull
from fleet_rl.prompts import format_answer
from fleet_rl.scenario_generator import TASKS
from fleet_rl.server.eviction import EVICTED_CLOSE_CODE
from fleet_rl.server.subprocess_server import server_process
from fleet_rl.training.dataset import planner_answer

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


WORKING_SESSIONS = 16
SILENT_GOAL = {"working_errors": 0, "step_p99_ms_below": 50.0, "newcomer_within_threshold_plus_s": 2.0}


@dataclass
class _Working:
    """What the working sessions record: step latencies (s) per phase of the run, and every error."""

    phase: str = "alone"
    step_s: dict[str, list[float]] = field(default_factory=lambda: {"alone": [], "flood": [], "after": []})
    errors: list[str] = field(default_factory=list)
    stop: bool = False


@dataclass
class _Flood:
    """What the silent connections saw."""

    held: int = 0  # connections that got a session
    evicted: int = 0  # ... and were closed by the server with EVICTED_CLOSE_CODE
    refused: int = 0  # refused tries: the server full, every session in use
    gave_up: int = 0  # connections that ended on an unexpected error frame
    close_reasons: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def _working_session(base_url: str, index: int, answers: dict, work: _Working) -> None:
    k = index * 7
    while not work.stop:
        try:
            async with FleetEnv(base_url=base_url, message_timeout_s=30) as env:
                while not work.stop:
                    task, seed = POOL[k % len(POOL)]
                    answer = '{"jobs": [' if k % 4 == 3 else answers[task, seed]
                    k += 1
                    await env.reset(task=task, seed=seed)
                    t0, phase = time.perf_counter(), work.phase
                    await env.step(FleetAction(plan=answer))
                    work.step_s[phase].append(time.perf_counter() - t0)
        except Exception as error:  # every failure of a working session is what this run counts
            work.errors.append(f"session {index}: {type(error).__name__}: {error}"[:300])
            await asyncio.sleep(0.1)


async def _silent_connection(ws_url: str, flood: _Flood) -> None:
    """One reset, then silence (see the module docstring); refused, it tries again after about 1 s."""
    reset = json.dumps({"type": "reset", "data": {"task": "easy", "seed": 0}})
    while True:
        try:
            async with websockets.connect(
                ws_url, compression=None, ping_interval=None, open_timeout=60
            ) as ws:
                with contextlib.suppress(websockets.ConnectionClosed):  # refused: its error frame is queued
                    await ws.send(reset)
                answer = json.loads(await ws.recv())
                if answer["type"] == "observation":
                    flood.held += 1
                    try:
                        await ws.recv()  # nothing comes: the server can only close it
                    except websockets.ConnectionClosed as closed:
                        if closed.rcvd is not None and closed.rcvd.code == EVICTED_CLOSE_CODE:
                            flood.evicted += 1
                            flood.close_reasons.append(closed.rcvd.reason)
                        else:
                            flood.errors.append(f"closed: {closed}"[:300])
                    return
                if answer["data"]["code"] != "CAPACITY_REACHED":
                    flood.errors.append(f"error frame: {answer['data']}"[:300])
                    flood.gave_up += 1
                    return
                flood.refused += 1
        except (OSError, websockets.WebSocketException) as error:
            flood.errors.append(f"{type(error).__name__}: {error}"[:300])
        await asyncio.sleep(random.uniform(0.5, 1.5))


async def _newcomer_wait(base_url: str, limit_s: float) -> tuple[float | None, int]:
    """Seconds until a new client gets a session (retrying every 0.25 s while refused; None if not within
    ``limit_s``), and its tries."""
    start, tries = time.perf_counter(), 0
    while time.perf_counter() - start < limit_s:
        tries += 1
        try:
            async with FleetEnv(base_url=base_url, message_timeout_s=30) as env:
                await env.reset(task="easy", seed=1)
                return time.perf_counter() - start, tries
        except ServerFull:
            await asyncio.sleep(0.25)
    return None, tries


def _latency(step_s: list[float]) -> dict:
    step_ms = 1000 * np.array(step_s)
    percentile = {q: round(float(np.percentile(step_ms, q)), 2) if step_s else None for q in (50, 99)}
    return {"steps": len(step_s), "step_p50_ms": percentile[50], "step_p99_ms": percentile[99]}


async def _silent_run(
    base_url: str,
    server_pid: int | None,
    silent: int,
    free_slots: int,
    evict_s: float,
    quick: bool,
    answers: dict,
) -> dict:
    alone_s, settle_s = (2.0, 1.0) if quick else (10.0, 3.0)
    work, flood, rss = _Working(), _Flood(), {}
    workers = [
        asyncio.create_task(_working_session(base_url, i, answers, work)) for i in range(WORKING_SESSIONS)
    ]
    await asyncio.sleep(alone_s)
    rss["before"] = rss_mb(server_pid) if server_pid else None
    work.phase, flood_start = "flood", time.perf_counter()
    ws_url = base_url.replace("http://", "ws://") + "/ws"
    connections = [asyncio.create_task(_silent_connection(ws_url, flood)) for _ in range(silent)]
    rounds = -(-silent // max(1, free_slots))  # the slots go round this many times
    deadline, peak = flood_start + 30.0 + 3 * evict_s * rounds, 0.0
    while flood.held + flood.gave_up < silent and time.perf_counter() < deadline:
        await asyncio.sleep(0.25)
        peak = max(peak, rss_mb(server_pid) or 0.0) if server_pid else peak
    flood_s = time.perf_counter() - flood_start
    newcomer_s, newcomer_tries = await _newcomer_wait(base_url, limit_s=evict_s + 60)
    peak = max(peak, rss_mb(server_pid) or 0.0) if server_pid else peak
    work.phase = "after"
    for connection in connections:
        connection.cancel()
    await asyncio.gather(*connections, return_exceptions=True)
    await asyncio.sleep(settle_s)
    rss["during_peak"], rss["after"] = (peak or None), rss_mb(server_pid) if server_pid else None
    work.stop = True
    await asyncio.gather(*workers)
    during = _latency(work.step_s["flood"])
    newcomer_limit_s = evict_s + SILENT_GOAL["newcomer_within_threshold_plus_s"]
    checks = {
        "no_working_errors": len(work.errors) == SILENT_GOAL["working_errors"],
        "step_p99": during["step_p99_ms"] is not None
        and during["step_p99_ms"] < SILENT_GOAL["step_p99_ms_below"],
        "newcomer_served": newcomer_s is not None and newcomer_s <= newcomer_limit_s,
        "every_silent_connection_held_a_session": flood.held == silent,
    }
    return {
        "working": {
            "sessions": WORKING_SESSIONS,
            "errors": len(work.errors),
            "error_samples": work.errors[:5],
            "alone": _latency(work.step_s["alone"]),
            "during_flood": during,
            "after": _latency(work.step_s["after"]),
        },
        "silent": {
            "connections": silent,
            "held_a_session": flood.held,
            "evicted": flood.evicted,
            "still_holding_at_the_newcomer": flood.held - flood.evicted,
            "refused_tries": flood.refused,
            "close_reason_sample": flood.close_reasons[-1] if flood.close_reasons else None,
            "errors": len(flood.errors),
            "error_samples": flood.errors[:5],
            "flood_s": round(flood_s, 2),
        },
        "newcomer": {"served_after_s": newcomer_s and round(newcomer_s, 3), "tries": newcomer_tries},
        "server_rss_mb": {key: round(mb, 1) if mb else None for key, mb in rss.items()},
        "goal": {"target": SILENT_GOAL, "checks": checks, "met": all(checks.values())},
    }


def _silent_report(silent: int, max_sessions: int, evict_s: float, quick: bool, answers: dict) -> dict:
    machine = _machine()
    load_start = [round(load, 2) for load in os.getloadavg()]
    extra_args = ("--max-sessions", str(max_sessions), "--evict-silent-after-s", str(evict_s))
    with server_process(extra_args=extra_args) as base_url:
        server_pid = child_pid_with("fleet_rl.server", "--port", base_url.rsplit(":", 1)[1])
        asyncio.run(_level(base_url, 4, len(POOL) // 4 + 1, answers))  # warm-up: solve the pool once
        free_slots = max_sessions - WORKING_SESSIONS
        sections = asyncio.run(_silent_run(base_url, server_pid, silent, free_slots, evict_s, quick, answers))
    machine = {
        **machine,
        "load_average_1_5_15_min_start": load_start,
        "load_average_1_5_15_min_end": [round(load, 2) for load in os.getloadavg()],
    }
    server = {"max_sessions": max_sessions, "evict_silent_after_s": evict_s}
    return {"benchmark": "server_load_silent", "machine": machine, "server": server, **sections}


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
    parser.add_argument(
        "--silent", type=int, metavar="N", help="N silent connections beside 16 working sessions instead"
    )
    parser.add_argument(
        "--max-sessions", type=int, default=64, help="the server's, with --silent (default 64)"
    )
    parser.add_argument(
        "--evict-silent-after-s", type=float, help="the server's, with --silent (default 5; 1 with --quick)"
    )
    args = parser.parse_args(argv)
    if args.soak is not None and (args.soak <= 0 or args.warmup_s < 0):
        parser.error("--soak must be > 0 and --warmup-s >= 0")
    if args.silent is not None and (args.silent < 1 or args.max_sessions <= WORKING_SESSIONS):
        parser.error(f"--silent must be >= 1 and --max-sessions > {WORKING_SESSIONS} (the working sessions)")
    answers = _answers()
    if args.silent is not None:
        evict_s = args.evict_silent_after_s or (1.0 if args.quick else 5.0)
        report = _silent_report(args.silent, args.max_sessions, evict_s, args.quick, answers)
        print(json.dumps(report, indent=2))
        return
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
