"""Extract and strictly validate the plan in an LLM completion; never raises (DESIGN.md §5).

The reward functions all start here: ``parse_plan(completion)`` turns whatever the policy wrote into either a
``Plan`` (the strict msgspec schema of ``fleet_rl.plan_schema``) or a machine-readable error code, so the
rewards can rank malformed answers below every real plan and log *why* an answer failed.

    result = parse_plan('Here is my plan: {"jobs": [...]}')
    plan, error, num_candidates = result        # plan is a Plan or None; error is None or a code below
    result.detail                               # human-readable detail of the error ("" when ok)

Pipeline, every step linear in the input length:

1. Text: a string, or a TRL conversational completion (a list of ``{"role", "content"}`` messages, of which
   the last assistant message is read; its content may be a list of ``{"type": "text", "text": ...}`` parts).
   Anything else is ``not_text``. Over ``MAX_COMPLETION_CHARS`` characters is ``too_large``, before any scan.
2. Reasoning is dropped: every ``<think>...</think>`` block, a leading unopened ``...</think>`` (the chat
   template opened the tag in the prompt), and an unclosed ``<think>`` to the end of the text (the answer
   never started).
3. Regions, in order of preference: the contents of ```json fences; else of bare ``` fences; else the whole
   text. The first region set holding a plan-like object (one with a ``"jobs"`` key) is used; if none does,
   the error comes from the first region set holding a ``{`` at all.
4. A scanner finds the top-level balanced ``{...}`` objects, respecting JSON strings and escapes (so
   ``"id": "a}b"`` does not close the object). Nesting deeper than ``MAX_NESTING`` is ``too_deep``.
5. Each object is decoded; those that decode to a mapping with a ``"jobs"`` key are the candidates.
   One candidate is validated against ``Plan`` (``schema`` on failure). Several candidates are
   ``several_plans`` with ``plan=None``: hedging with several plans scores as malformed, so it can never beat
   writing the best plan alone (the IRD rule of DESIGN.md §5). Only the chosen region set is counted, so a
   plan shown in prose and repeated in a ```json fence counts once, and the fence is what gets scored.

Simplifications: a plan nested inside another object (``{"plan": {"jobs": ...}}``) is not looked for and
fails as ``schema``; think tags and fences are matched case-sensitively; a fence's content ends at the next
``` (an unclosed fence runs to the end of the text).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from fleet_rl.plan_schema import PLAN_JSON_SCHEMA, Plan, plan_from_json, plan_from_object

if TYPE_CHECKING:
    from collections.abc import Iterator

    from fleet_rl.scenario import Scenario

__all__ = [
    "BAD_JSON",
    "DUPLICATE_JOB",
    "MAX_COMPLETION_CHARS",
    "MAX_NESTING",
    "MISSING_JOB",
    "NOT_TEXT",
    "NO_JSON",
    "PARSE_ERRORS",
    "PLAN_JSON_SCHEMA",
    "SCENARIO_ERRORS",
    "SCHEMA",
    "SEVERAL_PLANS",
    "TOO_DEEP",
    "TOO_LARGE",
    "UNKNOWN_JOB",
    "ParseResult",
    "check_against_scenario",
    "completion_text",
    "parse_plan",
]

MAX_COMPLETION_CHARS = 20_000  # a 2-3 job plan is ~150 tokens; 20k chars leaves ample room for reasoning
MAX_NESTING = 32  # a plan nests 4 deep ({jobs: [{precision: {}}]})
_MAX_RESTARTS = 8  # an unclosed "{" is retried from the next character at most this often: O(9·n)

# Parse error codes (ParseResult.error).
NOT_TEXT = "not_text"  # the completion is neither a string nor a conversational message list
TOO_LARGE = "too_large"  # over MAX_COMPLETION_CHARS characters
NO_JSON = "no_json"  # no "{" in the answer
TOO_DEEP = "too_deep"  # an object nests deeper than MAX_NESTING
BAD_JSON = "bad_json"  # a "{" was found but no object decodes (unbalanced, truncated, trailing comma...)
SCHEMA = "schema"  # JSON decodes but is not a valid Plan (wrong key, enum case, type, bound...)
SEVERAL_PLANS = "several_plans"  # more than one plan-like object: scored as malformed
PARSE_ERRORS: frozenset[str] = frozenset(
    {NOT_TEXT, TOO_LARGE, NO_JSON, TOO_DEEP, BAD_JSON, SCHEMA, SEVERAL_PLANS}
)

# Consistency codes (check_against_scenario).
UNKNOWN_JOB = "unknown_job"  # a plan entry whose id is not a job of the scenario
DUPLICATE_JOB = "duplicate_job"  # an id planned more than once
MISSING_JOB = "missing_job"  # a scenario job with no plan entry
SCENARIO_ERRORS: tuple[str, ...] = (UNKNOWN_JOB, DUPLICATE_JOB, MISSING_JOB)

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_FENCE = "```"
_FENCE_TAG = re.compile(r"[A-Za-z0-9_+.-]*")  # the info string right after ```, e.g. "json"
_STRUCTURAL = re.compile(r'[{}\[\]"\\]')  # a single character class: no backtracking


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Outcome of ``parse_plan``. Unpacks as three values: ``plan, error, num_candidates = result``.

    ``plan`` is set exactly when ``error`` is None. ``num_candidates`` counts the plan-like objects (decoded
    mappings with a ``"jobs"`` key) in the chosen region. ``detail`` explains the error for humans and logs;
    it is not part of the unpacking.
    """

    plan: Plan | None
    error: str | None
    num_candidates: int
    detail: str = ""

    def __iter__(self) -> Iterator[object]:
        return iter((self.plan, self.error, self.num_candidates))


def completion_text(completion: object) -> str | None:
    """The answer text of a completion (string or TRL conversational list), or None if there is none."""
    if isinstance(completion, str):
        return completion
    if not isinstance(completion, list | tuple):
        return None
    for message in reversed(completion):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return _content_text(message.get("content"))
    return None


def _content_text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        return None
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts)


def _strip_think(text: str) -> str:
    """Drop ``<think>...</think>`` blocks, a leading unopened ``...</think>``, an unclosed ``<think>...``."""
    first_open = text.find(_THINK_OPEN)
    first_close = text.find(_THINK_CLOSE)
    position = 0
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        position = first_close + len(_THINK_CLOSE)
    kept = []
    while True:
        start = text.find(_THINK_OPEN, position)
        if start == -1:
            kept.append(text[position:])
            break
        kept.append(text[position:start])
        end = text.find(_THINK_CLOSE, start + len(_THINK_OPEN))
        if end == -1:
            break
        position = end + len(_THINK_CLOSE)
    return "".join(kept)


def _fenced_blocks(text: str) -> tuple[list[str], list[str]]:
    """Contents of ```json fences and of bare ``` fences (other languages are left to the whole-text scan)."""
    json_blocks: list[str] = []
    bare_blocks: list[str] = []
    position = 0
    while True:
        start = text.find(_FENCE, position)
        if start == -1:
            break
        tag_end = _FENCE_TAG.match(text, start + len(_FENCE)).end()
        tag = text[start + len(_FENCE) : tag_end].lower()
        end = text.find(_FENCE, tag_end)
        body = text[tag_end:] if end == -1 else text[tag_end:end]
        if tag == "json":
            json_blocks.append(body)
        elif not tag:
            bare_blocks.append(body)
        if end == -1:
            break
        position = end + len(_FENCE)
    return json_blocks, bare_blocks


class _TooDeep(Exception):
    pass


def _balanced_end(text: str, start: int) -> int:
    """Index just past the object opened at ``text[start] == "{"``, or -1 if it never closes."""
    depth = 0
    in_string = False
    position = start
    search = _STRUCTURAL.search
    while True:
        match = search(text, position)
        if match is None:
            return -1
        index = match.start()
        char = text[index]
        position = index + 1
        if in_string:
            if char == "\\":
                position += 1  # skip the escaped character
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
            if depth > MAX_NESTING:
                raise _TooDeep
        elif char in "}]":
            depth -= 1  # brackets are not matched by kind: a mismatch fails decoding later
            if depth == 0:
                return position


def _top_level_objects(text: str) -> tuple[list[tuple[str, bool]], bool]:
    """Top-level balanced ``{...}`` substrings, each with whether it follows an unclosed ``{``; and whether
    any ``{`` occurs. Raises ``_TooDeep``.

    An unclosed ``{`` (a stray brace in prose, or a truncated object) is retried from the next character at
    most ``_MAX_RESTARTS`` times, so the scan stays linear in ``len(text)``. Objects found after such a retry
    may be fragments of a truncated object (its ``"precision"`` map, say), so callers use them only if they
    are plan-like.
    """
    objects: list[tuple[str, bool]] = []
    restarts = 0
    position = 0
    saw_brace = False
    while True:
        start = text.find("{", position)
        if start == -1:
            break
        saw_brace = True
        end = _balanced_end(text, start)
        if end == -1:
            restarts += 1
            if restarts > _MAX_RESTARTS:
                break
            position = start + 1
        else:
            objects.append((text[start:end], restarts > 0))
            position = end
    return objects, saw_brace


def _decode(candidate: str) -> tuple[bool, object, str]:
    """Untyped decode: (True, value, "") or (False, None, error message)."""
    try:
        return True, msgspec.json.decode(candidate), ""
    except (msgspec.DecodeError, UnicodeEncodeError) as error:  # lone surrogates cannot be encoded
        return False, None, str(error) or type(error).__name__


def _scan_region_set(regions: list[str]) -> tuple[list[str], list[object], str, bool]:
    """(plan-like texts, other decoded objects, first decode error, saw a brace) over a set of regions."""
    plan_like: list[str] = []
    others: list[object] = []
    first_error = ""
    saw_brace = False
    for region in regions:
        objects, saw = _top_level_objects(region)
        saw_brace = saw_brace or saw
        for candidate, after_unclosed in objects:
            decoded, value, error = _decode(candidate)
            if isinstance(value, dict) and "jobs" in value:
                plan_like.append(candidate)
            elif after_unclosed:
                continue  # maybe a fragment of a truncated object: the error is the unclosed brace
            elif not decoded:
                first_error = first_error or error
            else:
                others.append(value)
    return plan_like, others, first_error, saw_brace


def _schema_detail(error: Exception) -> str:
    return f"not a valid plan: {error}"


def parse_plan(completion: object) -> ParseResult:
    """Extract the one plan of a completion and validate it strictly against ``Plan``; never raises."""
    text = completion_text(completion)
    if text is None:
        return ParseResult(None, NOT_TEXT, 0, f"expected text or messages, got {type(completion).__name__}")
    if len(text) > MAX_COMPLETION_CHARS:
        return ParseResult(None, TOO_LARGE, 0, f"{len(text)} characters > {MAX_COMPLETION_CHARS}")
    text = _strip_think(text)
    json_blocks, bare_blocks = _fenced_blocks(text)
    first_braced: tuple[list[object], str] | None = None
    try:
        for regions in (json_blocks, bare_blocks, [text]):
            if not regions:
                continue
            plan_like, others, decode_error, saw_brace = _scan_region_set(regions)
            if plan_like:
                break
            if saw_brace and first_braced is None:
                first_braced = (others, decode_error)
    except _TooDeep:
        return ParseResult(None, TOO_DEEP, 0, f"an object nests deeper than {MAX_NESTING}")
    if not plan_like:
        if first_braced is None:
            return ParseResult(None, NO_JSON, 0, "no JSON object in the answer")
        others, decode_error = first_braced
        if others:
            try:
                plan_from_object(others[0])
            except msgspec.ValidationError as error:
                return ParseResult(None, SCHEMA, 0, _schema_detail(error))
        return ParseResult(None, BAD_JSON, 0, decode_error or "unbalanced braces: the object never closes")
    if len(plan_like) > 1:
        return ParseResult(None, SEVERAL_PLANS, len(plan_like), f"{len(plan_like)} plans in one answer")
    try:
        plan = plan_from_json(plan_like[0])
    except msgspec.ValidationError as error:
        return ParseResult(None, SCHEMA, 1, _schema_detail(error))
    return ParseResult(plan, None, 1)


def check_against_scenario(plan: Plan, scenario: Scenario) -> list[str]:
    """Consistency of a plan's job ids with a scenario: a sublist of ``SCENARIO_ERRORS`` (empty when fine).

    Each code appears at most once, in the order ``unknown_job``, ``duplicate_job``, ``missing_job``.
    """
    planned = Counter(job.id for job in plan.jobs)
    expected = set(scenario.job_ids)
    codes = []
    if any(job_id not in expected for job_id in planned):
        codes.append(UNKNOWN_JOB)
    if any(count > 1 for count in planned.values()):
        codes.append(DUPLICATE_JOB)
    if any(job_id not in planned for job_id in expected):
        codes.append(MISSING_JOB)
    return codes
