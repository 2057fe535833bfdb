"""A fake OpenAI-compatible chat endpoint for the endpoint-policy tests, run by uvicorn in a thread.

Its behaviour is picked by the request's model name: ``heuristic`` answers the heuristic baseline's plan for
the scenario in a compact-style prompt; ``prose`` answers without a plan; ``empty`` with no text; ``slow``
after 3 s; ``rate-limited`` always 429; ``flaky`` 429 on a prompt's first request, then ``heuristic``;
``flaky-503`` the same with 503; ``half-broken`` 500 every time for every other new prompt (the first,
third, ... it sees; ``broken`` holds their ``json.dumps(messages)``), ``heuristic`` for the rest;
``echo-key`` 401 quoting the Authorization header it received (as a careless server might). ``requests``
counts the requests per model; ``in_flight_max`` the most requests it held at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from fleet_rl.baselines import heuristic
from fleet_rl.prompts import format_answer
from fleet_rl.scenario import Scenario
from fleet_rl.server.subprocess_server import free_port


def _completion(model: str, text: str | None) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def _heuristic_answer(messages: list[dict]) -> str:
    user = messages[-1]["content"]
    scenario = Scenario.from_json(user.split("Scenario: ", 1)[1].split("\n", 1)[0])
    return format_answer(heuristic(scenario))


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.seen: set[str] = set()
        self.broken: set[str] = set()
        self._answered: set[str] = set()
        self.in_flight = self.in_flight_max = 0
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="error")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    async def _chat(self, request: Request):
        body = await request.json()
        model, messages = body["model"], body["messages"]
        self.requests[model] += 1
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            await asyncio.sleep(0.05)  # long enough for concurrent requests to overlap
            if model == "slow":
                await asyncio.sleep(3.0)
                return _completion(model, "{}")
            if model == "rate-limited":
                return JSONResponse({"error": {"message": "slow down"}}, status_code=429)
            if model in ("flaky", "flaky-503"):
                key = model + json.dumps(messages)
                if key not in self.seen:
                    self.seen.add(key)
                    status = 429 if model == "flaky" else 503
                    return JSONResponse({"error": {"message": "busy"}}, status_code=status)
                return _completion(model, _heuristic_answer(messages))
            if model == "half-broken":
                prompt = json.dumps(messages)
                if prompt not in self.broken and prompt not in self._answered:
                    (self.broken if len(self.broken) <= len(self._answered) else self._answered).add(prompt)
                if prompt in self.broken:
                    return JSONResponse({"error": {"message": "internal error"}}, status_code=500)
                return _completion(model, _heuristic_answer(messages))
            if model == "echo-key":
                header = request.headers.get("authorization", "")
                return JSONResponse({"error": {"message": f"bad key in {header}"}}, status_code=401)
            if model == "prose":
                return _completion(model, "Give every job all the GPUs it can use.")
            if model == "empty":
                return _completion(model, None)
            return _completion(model, _heuristic_answer(messages))
        finally:
            self.in_flight -= 1

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake endpoint did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
