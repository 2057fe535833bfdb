"""The fast parsing paths agree with the scanner and with the original parser, result for result.

``parse_plan`` answers most completions without its scanner (``_only_object``, one ```json fence found by
``_one_json_fence``, both inlined for the usual shapes on index ranges of the completion; think tags and
fences found by one-character searches), scans brackets with a regex instead of character by character,
and short-cuts truncated answers (before decoding anything when the answer ends inside its first object).
None of that may change a result:
here each completion's ``ParseResult`` (plan, error, candidate count and detail) is compared with

- ``_parse_plan_scanner``: the same module without the fast path (the scanner on every completion);
- ``reference_parse``: the parser as it was before these paths existed, kept verbatim below but for its
  object scan, which follows the rule of issue #9 (class 6): a stray ``{`` that never closes, nests too deep
  or opens a span that does not decode no longer swallows what follows it (every ``{`` is tried; a span that
  fails is searched inside for plans), a character scanner with the same bound on rescans. The rule itself
  (every start scanned anew, no bound) is ``_reference_top_level_objects(text, fresh=True)``.
"""

from __future__ import annotations

import gc
import json
import random
import re

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet_rl import bench
from fleet_rl.kernel.solver import solve_scenario
from fleet_rl.plan_schema import plan_from_json, plan_from_object
from fleet_rl.scenario_generator import make_scenario
from rewards import parsing
from rewards.parsing import (
    BAD_JSON,
    MAX_COMPLETION_CHARS,
    MAX_NESTING,
    NO_JSON,
    NOT_TEXT,
    SCHEMA,
    SEVERAL_PLANS,
    TOO_DEEP,
    TOO_LARGE,
    completion_text,
    parse_plan,
)

# --- The parser before the fast paths (character-by-character scanner), verbatim but for names and the
# object scan of issue #9

_STRUCTURAL = re.compile(r'[{}\[\]"\\]')


def _reference_strip_think(text: str) -> str:
    first_open = text.find("<think>")
    first_close = text.find("</think>")
    position = 0
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        position = first_close + len("</think>")
    kept = []
    while True:
        start = text.find("<think>", position)
        if start == -1:
            kept.append(text[position:])
            break
        kept.append(text[position:start])
        end = text.find("</think>", start + len("<think>"))
        if end == -1:
            break
        position = end + len("</think>")
    return "".join(kept)


def _reference_fenced_blocks(text: str) -> tuple[list[str], list[str]]:
    json_blocks: list[str] = []
    bare_blocks: list[str] = []
    position = 0
    while True:
        start = text.find("```", position)
        if start == -1:
            break
        tag_end = re.compile(r"[A-Za-z0-9_+.-]*").match(text, start + 3).end()
        tag = text[start + 3 : tag_end].lower()
        end = text.find("```", tag_end)
        body = text[tag_end:] if end == -1 else text[tag_end:end]
        if tag == "json":
            json_blocks.append(body)
        elif not tag:
            bare_blocks.append(body)
        if end == -1:
            break
        position = end + 3
    return json_blocks, bare_blocks


_REFERENCE_DEEP = -2


def _reference_pass(text: str, start: int) -> tuple[dict[int, int], int]:
    """A character-by-character pass from ``text[start] == "{"``: each bracket it sees outside strings, with
    the index past its closing bracket, -1 (never closes) or too deep (its depth over MAX_NESTING first); and
    where the pass stops. The stack's bottom bracket is the first to go too deep: it is dropped, not fatal."""
    ends: dict[int, int] = {}
    stack = [start]
    in_string = False
    position = start + 1
    while True:
        match = _STRUCTURAL.search(text, position)
        if match is None:
            break
        index = match.start()
        char = text[index]
        position = index + 1
        if in_string:
            if char == "\\":
                position += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append(index)
            if len(stack) > MAX_NESTING:
                ends[stack.pop(0)] = _REFERENCE_DEEP
        elif char in "}]":
            ends[stack.pop()] = position
            if not stack:
                return ends, position
    for index in stack:
        ends[index] = -1
    return ends, len(text)


def _reference_fresh_end(text: str, start: int) -> int:
    """What one scan from ``text[start] == "{"`` alone finds: the index past its closing bracket, -1 if it
    never closes, _REFERENCE_DEEP if it nests deeper than MAX_NESTING first (no pass, no memo)."""
    depth = 0
    in_string = False
    position = start
    while True:
        match = _STRUCTURAL.search(text, position)
        if match is None:
            return -1
        index = match.start()
        char = text[index]
        position = index + 1
        if in_string:
            if char == "\\":
                position += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > MAX_NESTING:
                return _REFERENCE_DEEP
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position


def _reference_top_level_objects(text: str, fresh: bool = False) -> tuple:
    """Every "{" from the left is a start; a balanced span that decodes is taken whole; after a failed start
    (never closes, too deep, or a span that does not decode) the next "{" is tried if a '"jobs"' key or a
    backslash follows it (inside a span that does not decode; else the scan resumes after it, or stops after
    an unclosed "{"), and what lies inside a failed span counts only if plan-like.

    With ``fresh``, every start is scanned anew and nothing bounds the work (the rule itself); else a start
    that no pass saw outside strings though one went past it costs a new pass, at most 8 of them (later
    such starts are skipped)."""
    start = text.find("{")
    if start == -1:
        return [], [], "", False, False
    last_marker = max(text.rfind('"jobs"'), text.rfind("\\"))
    plan_like, others, first_error, too_deep = [], [], "", False
    known: dict[int, int] = {}
    covered = rescans = inside_until = 0
    while start != -1:
        if fresh:
            end = _reference_fresh_end(text, start)
        else:
            end = known.get(start)
            if end is None:
                if start < covered:
                    rescans += 1
                    if rescans > 8:
                        start = text.find("{", start + 1)
                        continue
                ends, stop = _reference_pass(text, start)
                known.update(ends)
                covered = max(covered, stop)
                end = ends[start]
        inside = start < inside_until
        if end < 0:
            too_deep = too_deep or (end == _REFERENCE_DEEP and not inside)
            if last_marker <= start:
                break
            inside_until = len(text) + 1
            start = text.find("{", start + 1)
            continue
        decoded, value, error = _reference_decode(text[start:end])
        if not decoded:
            if not inside:
                first_error = first_error or error
            if last_marker > start:
                inside_until = max(inside_until, end)
                start = text.find("{", start + 1)
            else:
                start = text.find("{", end)
            continue
        if isinstance(value, dict) and "jobs" in value:
            plan_like.append(text[start:end])
        elif not inside:
            others.append(value)
        start = text.find("{", end)
    return plan_like, others, first_error, too_deep, True


def _reference_decode(candidate: str) -> tuple[bool, object, str]:
    try:
        return True, msgspec.json.decode(candidate), ""
    except (msgspec.DecodeError, UnicodeEncodeError) as error:
        return False, None, str(error) or type(error).__name__


def _reference_scan_region_set(regions: list[str]) -> tuple[list[str], list[object], str, bool, bool]:
    plan_like: list[str] = []
    others: list[object] = []
    first_error = ""
    too_deep = saw_brace = False
    for region in regions:
        found, other, error, deep, saw = _reference_top_level_objects(region)
        plan_like += found
        others += other
        first_error = first_error or error
        too_deep = too_deep or deep
        saw_brace = saw_brace or saw
    return plan_like, others, first_error, too_deep, saw_brace


def reference_parse(completion: object) -> tuple:
    """(plan, error, num_candidates, detail) as the original ``parse_plan`` returned them."""
    text = completion_text(completion)
    if text is None:
        return None, NOT_TEXT, 0, f"expected text or messages, got {type(completion).__name__}"
    if len(text) > MAX_COMPLETION_CHARS:
        return None, TOO_LARGE, 0, f"{len(text)} characters > {MAX_COMPLETION_CHARS}"
    text = _reference_strip_think(text)
    json_blocks, bare_blocks = _reference_fenced_blocks(text)
    first_braced = None
    too_deep = False
    for regions in (json_blocks, bare_blocks, [text]):
        if not regions:
            continue
        plan_like, others, decode_error, deep, saw_brace = _reference_scan_region_set(regions)
        if plan_like:
            break
        too_deep = too_deep or deep
        if saw_brace and first_braced is None:
            first_braced = (others, decode_error)
    if not plan_like:
        if too_deep:
            return None, TOO_DEEP, 0, f"an object nests deeper than {MAX_NESTING}"
        if first_braced is None:
            return None, NO_JSON, 0, "no JSON object in the answer"
        others, decode_error = first_braced
        if others:
            try:
                plan_from_object(others[0])
            except msgspec.ValidationError as error:
                return None, SCHEMA, 0, f"not a valid plan: {error}"
        return None, BAD_JSON, 0, decode_error or "unbalanced braces: the object never closes"
    if len(plan_like) > 1:
        return None, SEVERAL_PLANS, len(plan_like), f"{len(plan_like)} plans in one answer"
    try:
        plan = plan_from_json(plan_like[0])
    except msgspec.ValidationError as error:
        return None, SCHEMA, 1, f"not a valid plan: {error}"
    return plan, None, 1, ""


def assert_agree(completion: object) -> None:
    result = parse_plan(completion)
    fields = (result.plan, result.error, result.num_candidates, result.detail)
    assert fields == reference_parse(completion), completion
    assert result == parsing._parse_plan_scanner(completion), completion


# --- Corpus: realistic answers (the benchmark's generator) and hand-written edge cases

PRECISION = {"embedding": "bf16", "attention": "bf16", "mlp": "fp8", "norm": "fp32", "lm_head": "bf16"}
PLAN = {
    "jobs": [
        {"id": "chat", "gpus": 2, "tensor_parallel": 2, "kv_cache": "fp8", "precision": PRECISION},
        {"id": "tune", "gpus": 6, "tensor_parallel": 1, "micro_batch_size": 2,
         "activation_checkpointing": True, "precision": {**PRECISION, "attention": "int4", "mlp": "int4"}},
    ]
}  # fmt: skip
P = json.dumps(PLAN)
P2 = json.dumps({"jobs": [{**PLAN["jobs"][0], "gpus": 4}, PLAN["jobs"][1]]})
BIG = json.dumps(
    {"jobs": [{**PLAN["jobs"][0], "id": f"j{i}", "gpus": 1, "tensor_parallel": 1} for i in range(16)]}
)
WRONG = P.replace('"mlp": "fp8"', '"mlp": "FP8"')

EDGE_CASES = [
    P,
    f"  \n{P}\n\n",
    f"Here: {P} -- done",
    f"```json\n{P}\n```",
    f"prose\n```json\n{P}\n```\nmore prose {{braces}}",
    f"```JSON\n{P}\n```",  # tag case
    f"```jsonc\n{P}\n```",  # another language: the whole text is the region
    f"```\n{P}\n```",  # bare fence
    f"```python\nx = {{}}\n```\n{P}",
    f"```json\n{P}\n```\n```json\n{P2}\n```",  # two plans
    f"```json\n{P}\n```\n```\n{P2}\n```",  # a json fence wins over a bare one
    f'```json\n{{"a": 1}}\n```\n{P}',  # the fence holds no plan: the whole text is scanned
    f"```json\n{P}\n``` and ``inline`` backticks",
    f"```json\n{P}\n````",
    f"`{P}`",
    f"```json\n{P}",  # unclosed fence
    f"```json\n{P[:80]}",  # truncated in an unclosed fence
    f"Draft {P2}\n```json\n{P[:120]}",  # truncated fence, a plan in the prose before it
    f"```json\n{P[:-3]}",
    f"```json\n{P[:-1]}",
    P[: len(P) // 2],
    P[:-1],
    '{"jobs": [{"id": "a", "gpus": t}',  # a literal cut short, then a closing brace
    '{"a": t}',  # ... which closes the object (msgspec calls it truncated: it wanted 4 bytes for "true")
    '{"a": [1, fa]}',
    '```json\n{"a": n}',
    '{"jobs": [{"id": "a", "x": {"y": t}',
    '{"a": {"jobs": []}',  # a plan-like object inside an unclosed one
    '{"plan": {"jobs": [1, 2]}',
    '{"x": "{\\"jobs\\": []}"',  # an escaped plan in a string
    '{"\\u006aobs": []}',  # an escaped key
    '{"x": 1} {"\\u006aobs": []',
    WRONG,
    f"```json\n{WRONG}\n```",
    f"{WRONG} {P}",
    f"{P} {{",
    f"{P} }}",
    f"{{ {P}",
    P + " " + "{" * (MAX_NESTING + 1),  # too deep after the plan
    P + " {" + "[" * MAX_NESTING,
    '{"a": {"jobs": []}, "b": 12345',  # a plan inside an object cut short
    '```json\n{"a": {"jobs": []}, "b": "xyz',
    '{"a": {"x": 1}, "b": {"jobs": [], "c": 1}, "d": 1',
    "{" * (MAX_NESTING + 1),
    '{"jobs":' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}",
    '{"jobs":' + "[" * MAX_NESTING + "]" * MAX_NESTING + "}",
    BIG,  # more than MAX_NESTING brackets in all
    BIG.replace('"bf16"', '"BF16"'),
    f"```json\n{BIG[:-5]}",
    '{"jobs": [], "jobs": []}',  # duplicate keys
    '{"jobs": 5, ]',  # fails the schema before the syntax error
    '{"jobs": [}',
    '{"jobs": [],}',
    "{}",
    "{} {}",
    '{"a": 1}',
    "[1, 2]",
    P.replace('"chat"', '"a}b"').replace('"tune"', '"t{\\"q\\"}"'),
    P.replace('"chat"', '"\\ud800"'),
    P.replace(" ", "\u00a0", 3),
    P.replace(" ", "\x0c"),
    "\x0c" + P,
    f"<think>{P2}</think>{P}",
    f"<think>{P2}</think>\n```json\n{P}\n```",
    f"<think>a</think> <think>b</think> {P}",
    f"<think>a</think> <b> {P}",
    f"<think>unclosed {P}",
    f"reasoning {P2} </think> {P}",
    f"</think>{P}</think>{P2}",
    f"<think></think><think>{P}",
    f"<THINK>{P2}</THINK>{P}",
    "",
    "no json here",
    "{",
    "}",
    '"',
    "\\",
    "```",
    "```json",
    "```json\n",
    "<think>",
    "</think>",
    None,
    5,
    [{"role": "assistant", "content": f"```json\n{P}\n```"}],
    [{"role": "assistant", "content": [{"type": "text", "text": P[:50]}, {"type": "text", "text": P[50:]}]}],
    [{"role": "user", "content": P}],
    P + " " * MAX_COMPLETION_CHARS,
]


def realistic_completions(count: int) -> list[str]:
    optimal = [
        solve_scenario(make_scenario(task, seed)).optimal_plan
        for task in ("medium", "hard", "multiagent")
        for seed in range(4)
    ]
    rng = random.Random(11)
    out = []
    for _ in range(count):
        plan = rng.choice(optimal)
        text, _ = bench.make_completion(bench.perturbed_plan(plan, rng), rng)
        out.append(text)
    return out


@pytest.mark.parametrize("completion", EDGE_CASES)
def test_edge_cases_agree(completion):
    assert_agree(completion)


def test_realistic_completions_agree():
    completions = realistic_completions(600)
    errors = set()
    for completion in completions:
        assert_agree(completion)
        errors.add(parse_plan(completion).error)
    assert {None, SCHEMA, BAD_JSON, NO_JSON, SEVERAL_PLANS} <= errors  # every path of the generator


def test_every_truncation_of_a_fenced_plan_agrees():
    for cut in range(len(P) + 1):
        assert_agree(f"Plan:\n```json\n{P[:cut]}")
        assert_agree(P[:cut])


@pytest.mark.parametrize(
    "shape",
    [
        "<think>a</think>\n{}",  # the truncated-answer check on a range of the completion
        "<think>a</think>\nPlan:\n```json\n{}",
        "Plan: {}",
        "{} and some prose after it",  # no "}" at the end: checked for truncation first, then decoded
        "{{ {}",  # a brace before the region
        "Draft {{\n```json\n{}",
        "```\n{}",
        "```json\n{}\n```",
        "<think>a</think> <b> ```json\n{}",
    ],
)
def test_every_truncation_in_other_shapes_agrees(shape):
    for cut in range(len(P) + 1):
        assert_agree(shape.format(P[:cut]))


def test_parse_results_and_plans_are_not_tracked_by_the_garbage_collector():
    result = parse_plan(f"```json\n{P}\n```")
    plan = result.plan
    assert plan is not None
    assert not any(map(gc.is_tracked, (result, plan, *plan.jobs, *(job.precision for job in plan.jobs))))


# --- Fuzzing

pieces = st.sampled_from(
    [
        "{",
        "}",
        "[",
        "]",
        '"',
        "\\",
        ":",
        ",",
        " ",
        "\n",
        "x",
        "1",
        "t",
        "true",
        "nul",
        '"jobs"',
        '"\\u006aobs"',
    ]
    + ["<think>", "</think>", "```", "```json\n", "```JSON\n", "```\n", "`", P, P2, WRONG, P[:40], P[40:]]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(pieces, max_size=25))
def test_fuzz_markup_soup_agrees(parts):
    assert_agree("".join(parts))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(P)), st.integers(0, len(P)), st.lists(pieces, max_size=3))
def test_fuzz_cut_and_spliced_plans_agree(cut, splice, parts):
    noise = "".join(parts)
    assert_agree(P[:cut])
    assert_agree(f"```json\n{P[:cut]}")
    assert_agree(P[:splice] + noise + P[splice:])
    assert_agree(f"text\n```json\n{P[:splice] + noise + P[splice:]}\n```")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_fuzz_text_agrees(text):
    assert_agree(text)
    assert_agree("{" + text)
    assert_agree(f"```json\n{{{text}")


@settings(max_examples=300, deadline=None)
@given(st.text(st.sampled_from('{}[]"\\ xa:'), max_size=60))
def test_bracket_scanner_matches_the_character_scanner(text):
    # The regex-driven scanner with remembered bracket outcomes finds the same objects as the character
    # scanner, and (with no bound on rescans) as scanning every start anew: the passes' outcomes are exact.
    assert parsing._top_level_objects(text) == _reference_top_level_objects(text)
    assert parsing._top_level_objects(text, max_rescans=10**9) == _reference_top_level_objects(
        text, fresh=True
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["{", "}", "[", "]", '"', "\\", '"jobs"', "x", ":", " ", "{}", '{"a":1}']),
        max_size=80,
    )
)
def test_pass_outcomes_match_fresh_scans_on_bracket_soup(parts):
    # Deeper soups than the character test: drops of too-deep brackets, rescans after stray quotes.
    text = "".join(parts)
    assert parsing._top_level_objects(text, max_rescans=10**9) == _reference_top_level_objects(
        text, fresh=True
    )
    assert parsing._top_level_objects(text) == _reference_top_level_objects(text)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["<think>", "</think>", "<", ">", "think", "a", "```", "```json", "`", "\n"])
    ).map("".join)
)
def test_think_and_fence_helpers_match_the_originals(text):
    assert parsing._strip_think(text) == _reference_strip_think(text)
    assert parsing._fenced_blocks(text) == _reference_fenced_blocks(text)
    lo, hi = parsing._one_json_fence(text)
    if lo != -1:
        assert _reference_fenced_blocks(text) == ([text[lo:hi]], [])


def test_msgspec_truncation_message_is_what_the_shortcut_expects():
    # If msgspec rewords it, the truncated-answer shortcut silently falls back to the scanner (slower only).
    with pytest.raises(msgspec.DecodeError, match=re.escape(parsing._TRUNCATED)):
        msgspec.json.decode(P[:40])
    assert parsing._truncated_without_plans(P[:40], 0)
