"""A policy behind an OpenAI-compatible endpoint (vLLM, ``transformers serve``, a hosted API), evaluated on
the same held-out prompts and scored by the same rewards as in-process models.

    settings = EndpointSettings(model="my-model", base_url="http://127.0.0.1:8000/v1")
    summary = evaluate_endpoint(
        settings, num_scenarios=32, tasks=["easy"], answers_file="outputs/reports/x.jsonl"
    )

Requests go through the official ``openai`` client (``AsyncOpenAI.chat.completions.create``), at most
``concurrency`` in flight, each with ``timeout_s``; the client retries connection errors, timeouts, 429 and
5xx answers ``max_retries`` times with exponential backoff (honouring ``Retry-After``). An item whose
request still fails, or whose answer has no text, gets an empty completion (reward 0, like any answer
without a plan) and its error in ``errors``; the rest of the evaluation goes on. If every request fails
for the same reason of the endpoint's (unreachable, the key refused, the model unknown), the evaluation
stops with ``EndpointError`` naming it, rather than reporting a policy that scores 0.

Answers are appended to ``answers_file`` (JSON lines, one per finished item) as they arrive, so an
interrupted evaluation loses nothing: run it again with the same file and only the missing items are asked.
Each record holds the prompt's hash (``key``: the whole chat, system prompt included) and the hash of the
request settings that produced it (``settings``: base URL, model, temperature, max_tokens; never the key).
An answer is reused only by a run with the same prompt and the same settings, and only if it has no error;
records of other settings stay in the file, unused. ``usage`` counts this run's requests only (distinct
prompts asked, their failures and tokens); ``reused_answers`` counts the prompts answered from the file.

The API key is read from the environment variable ``api_key_env`` names, never from the command line, and
never written: error messages are scrubbed of it before they reach a log or a report. Without the variable
the client sends a placeholder, which local servers (vLLM, ``transformers serve``) accept.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ENDPOINT_PREFIX",
    "EndpointAnswer",
    "EndpointError",
    "EndpointSettings",
    "answer_prompts",
    "evaluate_endpoint",
]

ENDPOINT_PREFIX = "openai:"  # eval.py --policies openai:<model name>
_NO_KEY = "no-key"  # what the client sends without a key (local servers accept anything)


class EndpointError(RuntimeError):
    """The endpoint cannot answer at all (every request failed the same way); the message says why."""


@dataclass(frozen=True)
class EndpointSettings:
    model: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 768
    concurrency: int = 8
    timeout_s: float = 120.0
    max_retries: int = 4

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("the endpoint policy needs a model name: openai:<model name>")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {self.base_url!r}"
            )
        if self.concurrency < 1 or self.max_tokens < 1 or self.timeout_s <= 0 or self.max_retries < 0:
            raise ValueError("concurrency and max_tokens must be >= 1, timeout_s > 0 and max_retries >= 0")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")


@dataclass(frozen=True)
class EndpointAnswer:
    text: str  # "" when the request failed or the answer had no text
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    reused: bool = False  # read from the answers file (asked in an earlier run), not requested in this one

    def record(self, prompt_key: str, settings_key: str) -> dict:
        """The answers file's line for this answer."""
        return {
            "key": prompt_key,
            "settings": settings_key,
            "text": self.text,
            "error": self.error,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


def _prompt_key(messages: Sequence[dict]) -> str:
    return hashlib.sha256(json.dumps(list(messages), sort_keys=True).encode()).hexdigest()[:24]


def _settings_key(settings: EndpointSettings) -> str:
    """What, besides the prompt, decides an answer: an answer is reused only under the same one."""
    request = {
        "base_url": settings.base_url.rstrip("/"),
        "model": settings.model,
        "temperature": float(settings.temperature),
        "max_tokens": int(settings.max_tokens),
    }
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]


def _scrub(message: str, key: str | None) -> str:
    message = " ".join(str(message).split())[:500]
    return message.replace(key, "***") if key else message


def _error_text(error: Exception, key: str | None) -> str:
    status = getattr(error, "status_code", None)
    kind = type(error).__name__ + (f" {status}" if status else "")
    return _scrub(f"{kind}: {error}", key)


async def _ask(client, settings: EndpointSettings, messages, semaphore, key: str | None) -> EndpointAnswer:
    import openai

    async with semaphore:
        try:
            response = await client.chat.completions.create(
                model=settings.model,
                messages=list(messages),
                temperature=settings.temperature,
                max_tokens=settings.max_tokens,
            )
        except openai.OpenAIError as error:
            return EndpointAnswer("", _error_text(error, key), 0, 0)
    usage = response.usage
    tokens = (usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else (0, 0)
    choice = response.choices[0] if response.choices else None
    text = choice.message.content if choice is not None and choice.message is not None else None
    if not text:
        return EndpointAnswer("", "the response has no text", *tokens)
    return EndpointAnswer(text, None, *tokens)


def _load_answers(path: Path | None, settings_key: str) -> dict[str, EndpointAnswer]:
    """The answers in ``path`` produced under ``settings_key`` (the last one per prompt)."""
    if path is None or not path.exists():
        return {}
    answers = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            if record.get("settings") != settings_key:
                continue  # other settings (or a record from before settings were kept): not this answer
            answers[record["key"]] = EndpointAnswer(
                record["text"], record["error"], record["prompt_tokens"], record["completion_tokens"], True
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a line cut short by an interruption: that item is asked again
    return answers


async def _answer_all(
    prompts, settings: EndpointSettings, settings_key: str, path: Path | None, done: dict
) -> None:
    import openai

    key = os.environ.get(settings.api_key_env) or None
    client = openai.AsyncOpenAI(
        base_url=settings.base_url,
        api_key=key or _NO_KEY,
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
    )
    semaphore = asyncio.Semaphore(settings.concurrency)
    todo = {}
    for messages in prompts:
        todo.setdefault(_prompt_key(messages), messages)
    todo = {k: m for k, m in todo.items() if k not in done or done[k].error is not None}
    log = path.open("a", encoding="utf-8") if path is not None else None

    async def ask(prompt_key: str, messages) -> tuple[str, EndpointAnswer]:
        return prompt_key, await _ask(client, settings, messages, semaphore, key)

    try:
        for finished in asyncio.as_completed([ask(k, m) for k, m in todo.items()]):
            prompt_key, answer = await finished
            done[prompt_key] = answer
            if log is not None:  # each answer on disk as it arrives: an interruption loses nothing
                log.write(json.dumps(answer.record(prompt_key, settings_key)) + "\n")
                log.flush()
    finally:
        if log is not None:
            log.close()
        await client.close()


def answer_prompts(
    prompts: Sequence[Sequence[dict]], settings: EndpointSettings, *, answers_file: str | Path | None = None
) -> list[EndpointAnswer]:
    """One answer per chat prompt (see the module docstring); answers already in ``answers_file`` without
    an error and under the same settings are reused (``reused=True``). ``EndpointError`` if every request
    failed the same way."""
    path = Path(answers_file) if answers_file is not None else None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    settings_key = _settings_key(settings)
    done = _load_answers(path, settings_key)
    asyncio.run(_answer_all(prompts, settings, settings_key, path, done))
    answers = [done[_prompt_key(messages)] for messages in prompts]
    errors = {answer.error for answer in answers}
    if answers and None not in errors and len(errors) == 1 and errors != {"the response has no text"}:
        raise EndpointError(f"every request to {settings.base_url} failed: {errors.pop()}")
    return answers


def evaluate_endpoint(
    settings: EndpointSettings,
    *,
    num_scenarios: int,
    tasks: Sequence[str],
    prompt_style: str = "full",
    dataset_seed: int | None = None,
    answers_file: str | Path | None = None,
    num_samples: int = 3,
) -> dict:
    """The endpoint's answers to the held-out rows ``evaluate_policy`` answers, scored by the training
    rewards (``heldout.summarise``), with this run's requests (``usage``: distinct prompts asked, failed,
    their tokens; ``reused_answers``: prompts answered from ``answers_file`` instead) and failures."""
    from fleet_rl.training.dataset import scenario_rows
    from fleet_rl.training.heldout import EVAL_DATASET_SEED, summarise

    seed = EVAL_DATASET_SEED if dataset_seed is None else dataset_seed
    rows = scenario_rows(tasks, num_scenarios, dataset_seed=seed, split="eval", prompt_style=prompt_style)
    answers = answer_prompts([row["prompt"] for row in rows], settings, answers_file=answers_file)
    summary = summarise(rows, [a.text for a in answers], [a.completion_tokens for a in answers])
    failed = [(row, a.error) for row, a in zip(rows, answers, strict=True) if a.error is not None]
    asked, reused = {}, {}  # per distinct prompt: a prompt met twice was asked (or reused) once
    for row, answer in zip(rows, answers, strict=True):
        (reused if answer.reused else asked)[_prompt_key(row["prompt"])] = answer
    summary["usage"] = {
        "requests": len(asked),
        "failed_requests": sum(a.error is not None for a in asked.values()),
        "prompt_tokens": sum(a.prompt_tokens for a in asked.values()),
        "completion_tokens": sum(a.completion_tokens for a in asked.values()),
        "reused_answers": len(reused),
    }
    summary["errors"] = [{"task": row["task"], "seed": row["seed"], "error": err} for row, err in failed[:10]]
    summary["endpoint"] = {
        "model": settings.model,
        "base_url": settings.base_url,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
    }
    summary["samples"] = [
        {"task": row["task"], "seed": row["seed"], "completion": a.text}
        for row, a in list(zip(rows, answers, strict=True))[:num_samples]
    ]
    return summary
