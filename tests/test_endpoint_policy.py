"""The endpoint policy against a fake OpenAI-compatible server: scores equal to the same answers scored
in process, bounded concurrency, retries, timeouts, failures per item, resumable answers reused only under
the same request settings, usage of this run only, no key leaks."""

from __future__ import annotations

import dataclasses
import json

import pytest

from eval import main as eval_main
from fleet_rl.baselines import heuristic
from fleet_rl.endpoint_policy import EndpointError, EndpointSettings, answer_prompts, evaluate_endpoint
from fleet_rl.prompts import format_answer
from fleet_rl.scenario import Scenario
from fleet_rl.server.subprocess_server import free_port
from fleet_rl.training.dataset import scenario_rows
from fleet_rl.training.heldout import EVAL_DATASET_SEED, summarise
from tests.fake_openai_server import FakeOpenAI

TASKS = ["easy", "medium"]
SECRET = "sk-test-0123456789abcdef"


@pytest.fixture(scope="module")
def fake():
    with FakeOpenAI() as server:
        yield server


def _settings(fake, model: str, **overrides) -> EndpointSettings:
    return EndpointSettings(model=model, base_url=fake.base_url, **{"max_retries": 1, **overrides})


def _evaluate(settings, tmp_path=None, **kwargs):
    return evaluate_endpoint(
        settings, num_scenarios=6, tasks=TASKS, prompt_style="compact",
        answers_file=None if tmp_path is None else tmp_path / "answers.jsonl", **kwargs,
    )  # fmt: skip


def test_answers_are_scored_like_the_same_answers_in_process(fake):
    summary = _evaluate(_settings(fake, "heuristic", concurrency=3))
    rows = scenario_rows(TASKS, 6, dataset_seed=EVAL_DATASET_SEED, split="eval", prompt_style="compact")
    answers = [format_answer(heuristic(Scenario.from_json(row["scenario"]))) for row in rows]
    expected = summarise(rows, answers, [20] * len(rows))
    for key in ("mean_percent_of_optimum", "mean_fleet_reward", "valid_plan_rate", "feasible_rate"):
        assert summary[key] == pytest.approx(expected[key])
    assert summary["usage"] == {
        "requests": 6,
        "failed_requests": 0,
        "prompt_tokens": 600,
        "completion_tokens": 120,
        "reused_answers": 0,
    }
    assert summary["mean_completion_tokens"] == 20 and summary["errors"] == []
    assert fake.in_flight_max <= 3


def test_prose_and_empty_answers_score_zero_without_raising(fake):
    prose = _evaluate(_settings(fake, "prose"))
    assert prose["mean_percent_of_optimum"] == 0.0 and prose["valid_plan_rate"] == 0.0
    assert prose["usage"]["failed_requests"] == 0
    empty = _evaluate(_settings(fake, "empty"))
    assert empty["mean_fleet_reward"] == 0.0 and empty["usage"]["failed_requests"] == 6
    assert {error["error"] for error in empty["errors"]} == {"the response has no text"}


@pytest.mark.parametrize("model", ["flaky", "flaky-503"])
def test_a_429_or_5xx_on_first_try_is_retried_with_backoff(fake, model):
    summary = _evaluate(_settings(fake, model, max_retries=2))
    assert summary["usage"]["failed_requests"] == 0 and summary["mean_percent_of_optimum"] > 0
    assert fake.requests[model] == 12  # each prompt: one 429 (or 503), then the answer


def test_a_429_storm_or_a_dead_endpoint_stops_with_a_clear_message(fake, tmp_path):
    with pytest.raises(EndpointError, match=r"every request to .* failed: RateLimitError 429"):
        _evaluate(_settings(fake, "rate-limited", max_retries=1), tmp_path)
    assert fake.requests["rate-limited"] == 12  # 6 prompts x (1 try + 1 retry)
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert len(records) == 6 and len({record["key"] for record in records}) == 6  # every prompt's outcome
    for record in records:  # kept as failures, never as answers
        assert record["text"] == "" and "RateLimitError 429" in record["error"]
        assert record["prompt_tokens"] == record["completion_tokens"] == 0
    with pytest.raises(EndpointError, match="RateLimitError 429"):  # a rerun asks every failed item again
        _evaluate(_settings(fake, "rate-limited", max_retries=0), tmp_path)
    assert fake.requests["rate-limited"] == 18
    assert len((tmp_path / "answers.jsonl").read_text().splitlines()) == 12
    dead = EndpointSettings(model="m", base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
    with pytest.raises(EndpointError, match="APIConnectionError"):
        _evaluate(dead)


def test_prompts_that_keep_failing_score_zero_and_the_others_are_scored(fake, tmp_path):
    output = tmp_path / "report"
    argv = [
        "--policies", "openai:half-broken,even_bf16", "--base_url", fake.base_url, "--max_retries", "1",
        "--num_scenarios", "6", "--tasks", *TASKS, "--prompt_style", "compact", "--output_dir", str(output),
    ]  # fmt: skip
    endpoint, baseline = eval_main(argv)["policies"]
    assert "error" not in endpoint and "summary" in baseline  # neither the policy nor the command failed
    rows = scenario_rows(TASKS, 6, dataset_seed=EVAL_DATASET_SEED, split="eval", prompt_style="compact")
    broken = [json.dumps(row["prompt"]) in fake.broken for row in rows]
    assert sum(broken) == 3 and fake.requests["half-broken"] == 3 + 3 * 2  # a broken prompt: try + retry
    good = {i: format_answer(heuristic(Scenario.from_json(row["scenario"]))) for i, row in enumerate(rows)}
    answers = ["" if broken[i] else good[i] for i in range(len(rows))]
    expected = summarise(rows, answers, [0 if failed else 20 for failed in broken])
    summary = endpoint["summary"]
    assert expected["mean_percent_of_optimum"] > 0
    for key in ("mean_percent_of_optimum", "mean_fleet_reward", "valid_plan_rate", "mean_completion_tokens"):
        assert summary[key] == pytest.approx(expected[key]), key
    assert summary["usage"] == {
        "requests": 6,
        "failed_requests": 3,
        "prompt_tokens": 300,
        "completion_tokens": 60,
        "reused_answers": 0,
    }
    failed_items = [(row["task"], row["seed"]) for row, failed in zip(rows, broken, strict=True) if failed]
    assert sorted((error["task"], error["seed"]) for error in summary["errors"]) == sorted(failed_items)
    assert all("InternalServerError 500" in error["error"] for error in summary["errors"])
    answers_file = output / "answers" / "half-broken.jsonl"
    records = [json.loads(line) for line in answers_file.read_text().splitlines()]
    assert sorted(record["text"] for record in records if record["error"] is None) == sorted(
        good[i] for i in range(len(rows)) if not broken[i]
    )
    assert [record["text"] for record in records if record["error"] is not None] == ["", "", ""]
    usage = (
        "- `openai:half-broken`: 6 requests, 3 failed; 300 prompt tokens, 60 completion tokens; "
        "0 answers reused from an earlier run"
    )
    assert usage in (output / "report.md").read_text().splitlines()
    again = eval_main(argv)["policies"][0]["summary"]  # a rerun asks only the failed items, which fail again
    assert fake.requests["half-broken"] == 9 + 3 * 2
    assert again["mean_percent_of_optimum"] == pytest.approx(summary["mean_percent_of_optimum"])
    assert again["usage"] == {  # this run's requests only: the 3 good answers were not asked again
        "requests": 3,
        "failed_requests": 3,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "reused_answers": 3,
    }
    usage = (
        "- `openai:half-broken`: 3 requests, 3 failed; 0 prompt tokens, 0 completion tokens; "
        "3 answers reused from an earlier run"
    )
    assert usage in (output / "report.md").read_text().splitlines()


def test_a_timeout_is_a_zero_for_that_item_and_a_clear_error(fake):
    settings = _settings(fake, "slow", timeout_s=0.5, max_retries=0)
    with pytest.raises(EndpointError, match="APITimeoutError"):
        answer_prompts([[{"role": "user", "content": "hi"}]], settings)


def test_answers_are_kept_as_they_arrive_and_a_rerun_asks_only_what_is_missing(fake, tmp_path):
    settings = _settings(fake, "heuristic")
    first = _evaluate(settings, tmp_path)
    asked = fake.requests["heuristic"]
    lines = (tmp_path / "answers.jsonl").read_text().splitlines()
    assert len(lines) == 6
    (tmp_path / "answers.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])  # cut short
    again = _evaluate(settings, tmp_path)
    assert fake.requests["heuristic"] == asked + 3
    assert again["mean_percent_of_optimum"] == pytest.approx(first["mean_percent_of_optimum"])
    assert again["usage"] == {  # the 3 asked now, not the 3 read back
        "requests": 3,
        "failed_requests": 0,
        "prompt_tokens": 300,
        "completion_tokens": 60,
        "reused_answers": 3,
    }


def _usage(requests: int, reused: int) -> dict:
    return {
        "requests": requests,
        "failed_requests": 0,
        "prompt_tokens": 100 * requests,
        "completion_tokens": 20 * requests,
        "reused_answers": reused,
    }


@pytest.mark.parametrize("change", ["temperature", "max_tokens", "base_url"])
def test_answers_are_reused_only_under_the_same_request_settings(fake, tmp_path, change):
    with FakeOpenAI() as other:  # the same answers at another address: another endpoint all the same

        def asked() -> int:
            return fake.requests["heuristic"] + other.requests["heuristic"]

        settings = _settings(fake, "heuristic")
        changed = {"temperature": 0.7, "max_tokens": 64, "base_url": other.base_url}[change]
        changed = dataclasses.replace(settings, **{change: changed})
        start = asked()
        first = _evaluate(settings, tmp_path)
        assert first["usage"] == _usage(6, 0) and asked() == start + 6
        assert _evaluate(changed, tmp_path)["usage"] == _usage(6, 0)  # every prompt asked again
        assert asked() == start + 12
        for again in (settings, changed):  # the same settings: nothing asked, every answer reused
            summary = _evaluate(again, tmp_path)
            assert summary["usage"] == _usage(0, 6) and asked() == start + 12
            assert summary["mean_percent_of_optimum"] == pytest.approx(first["mean_percent_of_optimum"])
        assert other.requests["heuristic"] == (6 if change == "base_url" else 0)  # asked where it was told
    records = [json.loads(line) for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert len(records) == 12  # the first settings' answers are kept beside the second's
    by_settings = {}
    for record in records:
        by_settings.setdefault(record["settings"], set()).add(record["key"])
    assert len(by_settings) == 2 and [len(keys) for keys in by_settings.values()] == [6, 6]


def test_answers_without_settings_are_asked_again(fake, tmp_path):
    settings = _settings(fake, "heuristic")
    _evaluate(settings, tmp_path)
    path = tmp_path / "answers.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "settings"}) + "\n" for r in records)
    )
    asked = fake.requests["heuristic"]
    assert _evaluate(settings, tmp_path)["usage"] == _usage(6, 0)  # whose settings they were is unknown
    assert fake.requests["heuristic"] == asked + 6


def test_the_key_is_sent_but_never_written(fake, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FLEET_TEST_KEY", SECRET)
    output = tmp_path / "report"
    report = eval_main([
        "--policies", "openai:echo-key,heuristic", "--base_url", fake.base_url,
        "--api_key_env", "FLEET_TEST_KEY", "--max_retries", "0", "--num_scenarios", "4",
        "--tasks", "easy", "--prompt_style", "compact", "--output_dir", str(output),
    ])  # fmt: skip
    endpoint, baseline = report["policies"]
    assert "AuthenticationError 401" in endpoint["error"] and "***" in endpoint["error"]
    assert "summary" in baseline  # the other policy went on
    written = "".join(path.read_text(errors="ignore") for path in output.rglob("*") if path.is_file())
    assert SECRET not in written and SECRET not in json.dumps(report)
    assert SECRET not in capsys.readouterr().err


def test_eval_reports_an_endpoint_beside_baselines(fake, tmp_path):
    output = tmp_path / "report"
    argv = [
        "--policies", "openai:heuristic,even_bf16", "--base_url", fake.base_url, "--num_scenarios", "4",
        "--tasks", "easy", "--prompt_style", "compact", "--output_dir", str(output),
    ]  # fmt: skip
    report = eval_main(argv)
    endpoint = report["policies"][0]
    assert endpoint["kind"] == "endpoint" and endpoint["summary"]["usage"]["requests"] == 4
    table = (output / "report.md").read_text()
    assert "`openai:heuristic`" in table
    usage = (
        "- `openai:heuristic`: 4 requests, 0 failed; 400 prompt tokens, 80 completion tokens; "
        "0 answers reused from an earlier run"
    )
    assert usage in table.splitlines() and "- `even_bf16`" not in table  # usage for the endpoint only
    assert (output / "answers" / "heuristic.jsonl").exists()
    asked = fake.requests["heuristic"]
    again = eval_main(argv)["policies"][0]["summary"]  # the same flags: nothing asked
    assert fake.requests["heuristic"] == asked and again["usage"]["reused_answers"] == 4
    assert again["mean_percent_of_optimum"] == pytest.approx(endpoint["summary"]["mean_percent_of_optimum"])
    usage = (
        "- `openai:heuristic`: 0 requests, 0 failed; 0 prompt tokens, 0 completion tokens; "
        "4 answers reused from an earlier run"
    )
    assert usage in (output / "report.md").read_text().splitlines()
    hotter = eval_main([*argv, "--temperature", "0.5"])["policies"][0]["summary"]  # another temperature
    assert fake.requests["heuristic"] == asked + 4 and hotter["usage"]["requests"] == 4
    assert hotter["usage"]["reused_answers"] == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--policies", "openai:m"], "needs --base_url"),
        (["--policies", "openai:"], "names no model"),
        (["--policies", "openai:m", "--base_url", "localhost:8000"], "must be an http"),
        (["--policies", "openai:m", "--base_url", "http://x/v1", "--temperature", "3"], "temperature"),
        (["--policies", "openai:m", "--base_url", "http://x/v1", "--concurrency", "0"], "concurrency"),
    ],
)
def test_bad_endpoint_flags_are_usage_errors(flags, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        eval_main([*flags, "--output_dir", str(tmp_path)])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
