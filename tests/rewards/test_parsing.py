"""Tests of rewards.parsing: literal completions, one per extraction path and error code, plus fuzzing."""

from __future__ import annotations

import gc
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl.plan_schema import Plan, plan_from_object
from rewards import (
    BAD_JSON,
    MAX_COMPLETION_CHARS,
    MAX_NESTING,
    NO_JSON,
    NOT_TEXT,
    PARSE_ERRORS,
    PLAN_JSON_SCHEMA,
    SCHEMA,
    SEVERAL_PLANS,
    TOO_DEEP,
    TOO_LARGE,
    ParseResult,
    parse_plan,
)

# The DESIGN.md §3 example plan, written out as the model would.
PLAN_TEXT = (
    '{"jobs": ['
    '{"id": "chat", "gpus": 2, "tensor_parallel": 2, "precision": {"embedding": "bf16", "attention": "bf16",'
    ' "mlp": "fp8", "norm": "fp32", "lm_head": "bf16"}, "micro_batch_size": 8,'
    ' "activation_checkpointing": false, "kv_cache": "fp8"},'
    ' {"id": "tune", "gpus": 6, "tensor_parallel": 1, "precision": {"embedding": "bf16", "attention": "int4",'
    ' "mlp": "int4", "norm": "fp32", "lm_head": "bf16"}, "micro_batch_size": 2,'
    ' "activation_checkpointing": true}'
    "]}"
)
OTHER_PLAN_TEXT = PLAN_TEXT.replace('"gpus": 6', '"gpus": 4')


def assert_design_plan(result: ParseResult) -> None:
    plan, error, num_candidates = result
    assert error is None and result.detail == ""
    assert num_candidates == 1
    assert isinstance(plan, Plan)
    assert [job.id for job in plan.jobs] == ["chat", "tune"]
    assert plan.jobs[0].precision.mlp == "fp8" and plan.jobs[0].kv_cache == "fp8"
    assert plan.jobs[1].gpus == 6 and plan.jobs[1].activation_checkpointing is True
    assert plan == plan_from_object(json.loads(PLAN_TEXT))


# --- Extraction paths that succeed


def test_bare_json():
    # The whole completion is the JSON plan.
    assert_design_plan(parse_plan(PLAN_TEXT))


def test_json_fence_amid_prose():
    # A ```json fence between explanations; the prose mentions {braces} that are not JSON.
    text = (
        f"Serving gets {{2 GPUs}}, the rest goes to tuning.\n```json\n{PLAN_TEXT}\n```\nHope that helps {{!}}"
    )
    assert_design_plan(parse_plan(text))


def test_bare_fence():
    # A fence without a language tag.
    assert_design_plan(parse_plan(f"Plan:\n```\n{PLAN_TEXT}\n```"))


def test_json_fence_preferred_over_plan_in_prose():
    # A draft plan in prose, the final one in a ```json fence: the fence is what counts, once.
    result = parse_plan(f"Draft: {OTHER_PLAN_TEXT}\nFinal:\n```json\n{PLAN_TEXT}\n```")
    assert_design_plan(result)


def test_json_after_think_with_decoy_brace():
    # Reasoning holds a decoy plan and a stray "{"; only the text after </think> is the answer.
    text = f'<think>maybe {{"jobs": []}} or {{ hmm, no.</think>\nHere it is: {PLAN_TEXT}'
    assert_design_plan(parse_plan(text))


def test_unopened_think_prefix():
    # The chat template opened <think> in the prompt: everything up to </think> is reasoning.
    assert_design_plan(parse_plan(f'decoy {{"jobs": []}} </think> {PLAN_TEXT}'))


def test_unclosed_think_hides_everything_after_it():
    # The answer never started: a plan inside an unclosed <think> is not an answer.
    assert parse_plan(f"<think>let me try {PLAN_TEXT}").error == NO_JSON


def test_conversational_message_list():
    # TRL conversational completion: the last assistant message is the answer.
    completion = [
        {"role": "assistant", "content": '{"jobs": []}'},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": f"Sure: {PLAN_TEXT}"},
    ]
    assert_design_plan(parse_plan(completion))


def test_content_parts_list():
    # Content as typed parts; non-text parts are skipped and text parts are concatenated.
    half = len(PLAN_TEXT) // 2
    completion = [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": PLAN_TEXT[:half]},
                {"type": "image", "url": "x.png"},
                {"type": "text", "text": PLAN_TEXT[half:]},
            ],
        }
    ]
    assert_design_plan(parse_plan(completion))


def test_braces_inside_strings_and_trailing_prose():
    # "a}b" and "{" inside strings must not end or open objects; prose after the plan has braces too.
    text = PLAN_TEXT.replace('"chat"', '"a}b"').replace('"tune"', '"t{\\"q\\"}"') + " trailing {prose} }"
    plan, error, num_candidates = parse_plan(text)
    assert error is None and num_candidates == 1
    assert [job.id for job in plan.jobs] == ["a}b", 't{"q"}']


# --- Error codes


def test_two_plans_are_several_plans_and_no_plan():
    # Hedging: two plans in one answer score as malformed (plan is None), never as the better of the two.
    result = parse_plan(f"Option A: {PLAN_TEXT}\nOption B: {OTHER_PLAN_TEXT}")
    assert result == ParseResult(None, SEVERAL_PLANS, 2, result.detail)
    # Also when both sit in ```json fences, and when the two are identical.
    assert parse_plan(f"```json\n{PLAN_TEXT}\n```\n```json\n{PLAN_TEXT}\n```").error == SEVERAL_PLANS


def test_truncated_json_is_bad_json():
    # Generation stopped mid-object, after a complete inner "precision" object: that fragment is not
    # mistaken for the answer (it would be a schema error), the unclosed brace is the error.
    assert parse_plan(PLAN_TEXT[: len(PLAN_TEXT) // 2]).error == BAD_JSON
    assert parse_plan(PLAN_TEXT[:-1]).error == BAD_JSON


@pytest.mark.parametrize("cut", [10, 37, 80, -2])
def test_an_answer_cut_off_anywhere_is_an_object_that_never_closes(cut):
    # rewards/parsing.py recognises a cut-off object by one decode: every cut gives the scan's own verdict
    for answer in (PLAN_TEXT[:cut], f"Here it is:\n```json\n{PLAN_TEXT[:cut]}"):
        result = parse_plan(answer)
        assert (result.error, result.detail) == (BAD_JSON, "unbalanced braces: the object never closes")


def test_a_closed_object_msgspec_calls_truncated_is_not_cut_off():
    # msgspec reads 4 bytes for a literal: '{"a": t}' is "truncated" to it, yet the object closes
    result = parse_plan('{"a": t}')
    assert result.error == BAD_JSON and "never closes" not in result.detail


def test_stray_prose_brace_before_plan():
    # An unclosed "{" in prose must not swallow the plan that follows it.
    assert_design_plan(parse_plan(f'Mind the {{ brace and the " quote. {PLAN_TEXT}'))


def test_trailing_comma_is_bad_json():
    # Balanced but not JSON.
    assert parse_plan('{"jobs": [],}').error == BAD_JSON


def test_wrong_enum_case_is_schema():
    # Enum values are case-sensitive lower-case (DESIGN.md §3).
    plan, error, num_candidates = parse_plan(PLAN_TEXT.replace('"mlp": "fp8"', '"mlp": "BF16"'))
    assert (plan, error, num_candidates) == (None, SCHEMA, 1)


def test_string_number_is_schema():
    # Strict decoding: "2" is not an integer.
    assert parse_plan(PLAN_TEXT.replace('"gpus": 2', '"gpus": "2"')).error == SCHEMA


def test_object_without_jobs_is_schema():
    # Valid JSON that is not a plan at all.
    result = parse_plan('My answer: {"chat": 2, "tune": 6}')
    assert (result.error, result.num_candidates) == (SCHEMA, 0)
    assert "chat" in result.detail


def test_no_braces_is_no_json():
    # Prose only.
    assert parse_plan("Give chat two GPUs and tune the other six.") == ParseResult(
        None, NO_JSON, 0, "no JSON object in the answer"
    )
    assert parse_plan("").error == NO_JSON


def test_too_large():
    # Checked before any scanning, on the answer text.
    assert parse_plan(PLAN_TEXT + " " * MAX_COMPLETION_CHARS).error == TOO_LARGE
    assert parse_plan([{"role": "assistant", "content": "x" * (MAX_COMPLETION_CHARS + 1)}]).error == TOO_LARGE


def test_too_deep():
    # Nesting over MAX_NESTING is refused by the scanner before decoding; MAX_NESTING itself is fine.
    assert parse_plan('{"a":' * (MAX_NESTING + 1) + "1" + "}" * (MAX_NESTING + 1)).error == TOO_DEEP
    at_limit = '{"jobs":' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}"
    assert parse_plan(at_limit).error == SCHEMA


def test_parse_results_and_plans_are_not_tracked_by_the_garbage_collector():
    # A batch of tracked results would trigger collections (ParseResult and the plan structs have gc=False).
    result = parse_plan(f"```json\n{PLAN_TEXT}\n```")
    plan = result.plan
    assert plan is not None
    assert not any(map(gc.is_tracked, (result, plan, *plan.jobs, *(job.precision for job in plan.jobs))))


def test_lone_surrogate_is_bad_json():
    # Not encodable as UTF-8, so msgspec cannot decode it: reported, not raised.
    assert parse_plan('{"jobs": [{"id": "\ud800"}]}').error == BAD_JSON


@pytest.mark.parametrize(
    "completion",
    [
        None,  # nothing generated
        5,  # a number
        {"role": "assistant", "content": PLAN_TEXT},  # a bare message, not a list of messages
        b"{}",  # bytes are not decoded
        [{"role": "user", "content": PLAN_TEXT}],  # no assistant message
        [{"role": "assistant", "content": None}],  # e.g. a tool call without content
        ["just a string in a list"],  # not messages
    ],
)
def test_not_text(completion):
    assert parse_plan(completion).error == NOT_TEXT


# --- Performance sanity bounds (not benchmarks)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 2_000_000,  # 2 MB of prose
        "[" * 100_000,  # 100k-deep list
        '{"a":' * 100_000,  # 100k-deep object
        # Just under the size limit, so the scanner really runs:
        "[" * (MAX_COMPLETION_CHARS - 1),
        "{" * (MAX_COMPLETION_CHARS - 1),  # too deep at once
        "{ " * (MAX_COMPLETION_CHARS // 2 - 1),  # never balances: bounded restarts
        '{"' * (MAX_COMPLETION_CHARS // 2 - 1),  # one long unterminated string
        "{}" * (MAX_COMPLETION_CHARS // 2 - 1),  # ten thousand empty objects
        "x {" * (MAX_COMPLETION_CHARS // 3 - 1),
        "{ " * 20
        + "[]" * (MAX_COMPLETION_CHARS // 2 - 21),  # every retry of an unclosed "{" scans to the end
    ],
)
def test_adversarial_inputs_return_fast(text):
    start = time.process_time()
    result = parse_plan(text)
    assert time.process_time() - start < 1.0
    assert result.error in PARSE_ERRORS


# --- Fuzzing: never raises, always a known code

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
text_with_surrogates = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=200)
markup_pieces = st.sampled_from(
    ["{", "}", "[", "]", '"', "\\", ":", ",", " ", "x", "1", '"jobs"', "<think>", "</think>", "```"]
    + ["```json\n", PLAN_TEXT, PLAN_TEXT[:40]]
)


def assert_well_formed(result: object) -> None:
    assert isinstance(result, ParseResult)
    plan, error, num_candidates = result
    assert (plan is None) != (error is None)
    assert error is None or error in PARSE_ERRORS
    assert num_candidates >= 0


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_fuzz_text(text):
    assert_well_formed(parse_plan(text))


@settings(max_examples=300, deadline=None)
@given(text_with_surrogates)
def test_fuzz_text_with_surrogates_and_markup(text):
    # Lone surrogates cannot be UTF-8 encoded; markup pieces exercise the think/fence/scanner paths.
    for completion in (text, "{" + text + "}", f"<think>{text}</think>```json\n{{{text}}}\n```"):
        assert_well_formed(parse_plan(completion))


@settings(max_examples=300, deadline=None)
@given(st.lists(markup_pieces, max_size=30))
def test_fuzz_markup_soup(pieces):
    # Random sequences of the characters and tags the extractor reacts to.
    assert_well_formed(parse_plan("".join(pieces)))


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fuzz_json_objects(value):
    # Arbitrary JSON-like objects as the completion itself, as message content, and serialised as text.
    assert_well_formed(parse_plan(value))
    assert_well_formed(parse_plan([{"role": "assistant", "content": value}]))
    assert_well_formed(parse_plan(json.dumps(value)))
    assert_well_formed(parse_plan(f"prose {json.dumps({'jobs': value})} prose"))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(PLAN_TEXT)), st.text(max_size=20))
def test_fuzz_corrupted_plan(cut, noise):
    # A valid plan with noise spliced in anywhere.
    assert_well_formed(parse_plan(PLAN_TEXT[:cut] + noise + PLAN_TEXT[cut:]))


def test_schema_is_reexported():
    assert PLAN_JSON_SCHEMA["$ref"].endswith("/Plan")
