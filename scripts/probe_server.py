"""Probe a running Libratio Fleet server from outside, as a user of the Space would: ``--url http://HOST:PORT``.

    python scripts/probe_server.py --url http://127.0.0.1:7860           # a local server or the image
    python scripts/probe_server.py --url https://USER-SPACE.hf.space     # a deployed Space

Checks, in order: ``GET /health``; ``GET /tasks`` lists easy/medium/hard; one episode over ``/ws`` with
``fleet_rl.client.FleetEnv`` (reset a medium scenario, step the kernel's optimum: reward 1.0, done);
``POST /grader`` replays that episode to the same reward; bad input gets the codes the server gives today
(a non-JSON body 422, a plan naming an unknown job scored 0.01 with 200, a body over the limit 413) and the
server stays healthy. Prints one JSON line per check and exits 1 on the first failure, naming it. Needs the
lean install only (``pip install -c constraints/env.txt .``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

from fleet_rl.catalog.formats import MODULE_GROUPS
from fleet_rl.client import FleetAction, FleetEnv
from fleet_rl.kernel import solve
from fleet_rl.prompts import format_answer
from fleet_rl.scenario import Scenario
from fleet_rl.server.app import DEFAULT_MAX_BODY_BYTES

UNKNOWN_JOB_PLAN = json.dumps(
    {
        "jobs": [
            {
                "id": "no-such-job",
                "gpus": 1,
                "tensor_parallel": 1,
                "precision": dict.fromkeys(MODULE_GROUPS, "bf16"),
                "micro_batch_size": 1,
                "activation_checkpointing": False,
            }
        ]
    }
)
OVERSIZED_BODY_BYTES = DEFAULT_MAX_BODY_BYTES + 1024  # just over: a far larger body is cut off unread


class ProbeFailed(Exception):
    """A check whose answer was not the expected one; the message says which and what came back."""


def _http(url: str, method: str = "GET", body: bytes | None = None, timeout_s: float = 30.0):
    """(status, body text) of one request; an HTTP error's status and body too, not an exception."""
    request = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")


def _expect(condition: bool, check: str, got: object) -> None:
    if not condition:
        raise ProbeFailed(f"{check}: got {str(got)[:300]}")


def probe(base_url: str, seed: int = 3) -> list[dict]:
    """Run every check against ``base_url``; return one record per check (name, seconds, what it saw)."""
    base_url = base_url.rstrip("/")
    records = []

    def timed(name: str, check) -> None:
        start = time.perf_counter()
        seen = check()
        records.append({"check": name, "ok": True, "s": round(time.perf_counter() - start, 3), **seen})
        print(json.dumps(records[-1]), flush=True)

    def health() -> dict:
        status, body = _http(f"{base_url}/health")
        _expect(status == 200 and json.loads(body) == {"status": "healthy"}, "/health", (status, body))
        return {"status": status}

    def tasks() -> dict:
        status, body = _http(f"{base_url}/tasks")
        names = sorted(json.loads(body).get("tasks", {})) if status == 200 else []
        _expect(status == 200 and {"easy", "medium", "hard"} <= set(names), "/tasks", (status, body))
        return {"tasks": names}

    episode: dict = {}

    def websocket_episode() -> dict:
        with FleetEnv(base_url=base_url).sync() as env:
            first = env.reset(task="medium", seed=seed)
            scenario = Scenario.from_json(first.observation.scenario)
            plan = format_answer(solve(scenario).plan)
            result = env.step(FleetAction(plan=plan))
        _expect(result.done and abs(result.reward - 1.0) < 1e-9, "/ws episode", result)
        episode.update(plan=plan, reward=result.reward)
        return {"reward": result.reward, "jobs": len(scenario.jobs)}

    def grader() -> dict:
        request = {"task": "medium", "seed": seed, "plans": [episode["plan"]]}
        status, body = _http(f"{base_url}/grader", "POST", json.dumps(request).encode())
        reward = json.loads(body).get("episode_reward") if status == 200 else None
        _expect(status == 200 and reward == episode["reward"], "/grader replay", (status, body))
        return {"episode_reward": reward}

    def bad_input() -> dict:
        codes = {}
        codes["non_json"], body = _http(f"{base_url}/grader", "POST", b"{not json")
        _expect(codes["non_json"] == 422, "a non-JSON body", (codes["non_json"], body))
        request = {"task": "easy", "seed": 1, "plans": [UNKNOWN_JOB_PLAN]}
        codes["unknown_job"], body = _http(f"{base_url}/grader", "POST", json.dumps(request).encode())
        reward = json.loads(body).get("episode_reward") if codes["unknown_job"] == 200 else None
        _expect(reward == 0.01, "a plan naming an unknown job", (codes["unknown_job"], body))
        codes["oversized"], body = _http(f"{base_url}/grader", "POST", b" " * OVERSIZED_BODY_BYTES)
        _expect(codes["oversized"] == 413, "an oversized body", (codes["oversized"], body))
        health()
        return {"codes": codes}

    for name, check in (
        ("health", health),
        ("tasks", tasks),
        ("websocket_episode", websocket_episode),
        ("grader", grader),
        ("bad_input", bad_input),
    ):
        try:
            timed(name, check)
        except ProbeFailed:
            raise
        except Exception as error:  # a refused connection, a closed socket: say which check met it
            raise ProbeFailed(f"{name}: {type(error).__name__}: {error}") from error
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the server's base URL, e.g. http://127.0.0.1:7860")
    parser.add_argument("--seed", type=int, default=3, help="the medium scenario of the episode")
    args = parser.parse_args(argv)
    try:
        probe(args.url, seed=args.seed)
    except ProbeFailed as failure:
        print(f"probe failed: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
