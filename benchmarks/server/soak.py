"""Soak of the environment server: 16 sessions for a bounded time; steps, errors, latency and memory growth.

Run through the load benchmark (it owns the server process and the scenario pool):

    python -m benchmarks.server.load --soak 600                 # 60 s warm-up, then 10 minutes measured
    python -m benchmarks.server.load --soak 2 --warmup-s 1      # a smoke test

Each of the 16 sessions (``FleetEnv`` async clients, one WebSocket each) runs single-step episodes back to
back on the load benchmark's fixed pool of 24 requests, as the load benchmark does (one answer in four
malformed), until the time is up. A session that fails (an exception: a server refusal, a timeout, a
dropped connection) counts an error, reconnects and goes on, so one fault does not end the soak.

Reported (``soak``): ``steps`` and latency (``step_p50_ms``, ``step_p99_ms``, ``reset_p50_ms``,
``reset_p99_ms``) over the measured time after the warm-up; ``errors`` over the whole run, warm-up
included, with the first few messages; the server process's resident memory at the end of the warm-up
(``rss_start_mb``), at the end (``rss_end_mb``), its peak over the measured time, samples along the way,
and ``rss_growth_percent`` = end / start - 1. ``goal`` says whether the run met the soak target on
2 cores: 0 errors, RSS growth under 10 %, step p99 under 50 ms, over at least 10 minutes.
"""

from __future__ import annotations

import array
import asyncio
import time
from dataclasses import dataclass, field

import numpy as np

from benchmarks.process_memory import rss_mb
from fleet_rl.env.client import FleetAction, FleetEnv

__all__ = ["GOAL", "SOAK_SESSIONS", "run_soak"]

SOAK_SESSIONS = 16
MALFORMED_ANSWER = '{"jobs": ['
GOAL = {"errors": 0, "rss_growth_percent_below": 10.0, "step_p99_ms_below": 50.0, "soak_s_at_least": 600.0}
MAX_ERROR_SAMPLES = 5


@dataclass
class _Soak:
    """What the sessions record: latencies in seconds after the warm-up, and every error."""

    warmup_end: float
    end: float
    step_s: array.array = field(default_factory=lambda: array.array("d"))
    reset_s: array.array = field(default_factory=lambda: array.array("d"))
    errors: list[str] = field(default_factory=list)

    def finished(self) -> bool:
        return time.monotonic() >= self.end


async def _session(base_url: str, index: int, pool: list, answers: dict, soak: _Soak) -> None:
    k = index * 7  # sessions start at different places in the pool, as in the load benchmark
    while not soak.finished():
        try:
            async with FleetEnv(base_url=base_url, message_timeout_s=30) as env:
                while not soak.finished():
                    task, seed = pool[k % len(pool)]
                    answer = MALFORMED_ANSWER if k % 4 == 3 else answers[task, seed]
                    k += 1
                    t0 = time.monotonic()
                    await env.reset(task=task, seed=seed)
                    t1 = time.monotonic()
                    await env.step(FleetAction(plan=answer))
                    t2 = time.monotonic()
                    if t0 >= soak.warmup_end and t2 <= soak.end:
                        soak.reset_s.append(t1 - t0)
                        soak.step_s.append(t2 - t1)
        except Exception as error:  # every failure is what a soak counts
            soak.errors.append(f"session {index}: {type(error).__name__}: {error}"[:300])
            await asyncio.sleep(0.1)


async def _sample_rss(pid: int | None, soak: _Soak, samples: list, interval_s: float) -> None:
    """RSS of ``pid`` at the end of the warm-up, every ``interval_s`` after it, and at the end."""
    await asyncio.sleep(max(0.0, soak.warmup_end - time.monotonic()))
    while True:
        now = time.monotonic()
        samples.append((round(now - soak.warmup_end, 1), rss_mb(pid) if pid else None))
        if now >= soak.end:
            return
        await asyncio.sleep(min(interval_s, soak.end - now))


def _percentile_ms(seconds: array.array, q: float) -> float | None:
    return round(1000 * float(np.percentile(np.frombuffer(seconds), q)), 2) if len(seconds) else None


async def _soak(base_url: str, pool: list, answers: dict, soak_s: float, warmup_s: float, pid: int | None):
    start = time.monotonic()
    soak = _Soak(warmup_end=start + warmup_s, end=start + warmup_s + soak_s)
    samples: list[tuple[float, float | None]] = []
    sampler = _sample_rss(pid, soak, samples, interval_s=max(1.0, min(30.0, soak_s / 20)))
    await asyncio.gather(sampler, *(_session(base_url, i, pool, answers, soak) for i in range(SOAK_SESSIONS)))
    return soak, samples


def run_soak(
    base_url: str, pool: list, answers: dict, *, soak_s: float, warmup_s: float, server_pid: int | None
) -> dict:
    """Soak the server at ``base_url``; the ``soak`` and ``goal`` sections of the report."""
    soak, samples = asyncio.run(_soak(base_url, pool, answers, soak_s, warmup_s, server_pid))
    rss = [mb for _, mb in samples if mb is not None]
    rss_start, rss_end = (rss[0], rss[-1]) if rss else (None, None)
    growth = round(100 * (rss_end / rss_start - 1), 2) if rss else None
    step_p99 = _percentile_ms(soak.step_s, 99)
    report = {
        "sessions": SOAK_SESSIONS,
        "warmup_s": warmup_s,
        "soak_s": soak_s,
        "steps": len(soak.step_s),
        "steps_per_s": round(len(soak.step_s) / soak_s, 1),
        "errors": len(soak.errors),
        "error_samples": soak.errors[:MAX_ERROR_SAMPLES],
        "step_p50_ms": _percentile_ms(soak.step_s, 50),
        "step_p99_ms": step_p99,
        "reset_p50_ms": _percentile_ms(soak.reset_s, 50),
        "reset_p99_ms": _percentile_ms(soak.reset_s, 99),
        "server_pid_found": server_pid is not None,
        "rss_start_mb": round(rss_start, 1) if rss else None,
        "rss_end_mb": round(rss_end, 1) if rss else None,
        "rss_peak_mb": round(max(rss), 1) if rss else None,
        "rss_growth_percent": growth,
        "rss_samples_mb": [[t, round(mb, 1) if mb is not None else None] for t, mb in samples],
    }
    checks = {
        "no_errors": len(soak.errors) == GOAL["errors"],
        "rss_growth": growth is not None and growth < GOAL["rss_growth_percent_below"],
        "step_p99": step_p99 is not None and step_p99 < GOAL["step_p99_ms_below"],
        "long_enough": soak_s >= GOAL["soak_s_at_least"],
    }
    return {"soak": report, "goal": {"target": GOAL, "checks": checks, "met": all(checks.values())}}
