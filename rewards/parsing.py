"""Extract and strictly validate the plan in an LLM completion; never raises (DESIGN.md §5).

``parse_plan(completion)`` turns whatever the policy wrote into either a ``Plan`` (the strict msgspec schema
of ``fleet_rl.plan_schema``) or an error code, so the rewards can rank malformed answers below every real
plan and log *why* an answer failed:

    plan, error, num_candidates = parse_plan('Here is my plan: {"jobs": [...]}')
    parse_plan(completion).detail       # the error explained, for logs ("" when ok)

It reads a completion in five steps:

1. Text: a string, or the last assistant message of a TRL conversational completion (its content a string
   or a list of ``{"type": "text", "text": ...}`` parts); anything else is ``not_text``. Over
   ``MAX_COMPLETION_CHARS`` characters is ``too_large``.
2. Reasoning is dropped: a leading unopened ``...</think>`` (the chat template opened the tag), every
   ``<think>...</think>`` block, an unclosed ``<think>`` to the end. No ``{`` left is ``no_json``.
3. Regions, in order of preference: the contents of the ```json fences; else of the bare ``` fences; else
   the whole answer. A fence ends at the next ``` or at the end; fences of other languages are plain text.
4. Objects: each ``{`` from the left is tried as the start of a JSON object, and one that decodes is taken
   whole. A ``{`` that never closes, nests deeper than ``MAX_NESTING`` or opens a span that does not decode
   (a stray brace in prose, "use {fp8} here") is passed over, so it cannot swallow the plan after it; what
   lies inside such a span counts only if plan-like. Braces inside JSON strings (``"a}b"``) are text.
5. The plan: the candidates are the decoded mappings with a ``"jobs"`` key of the first region set that has
   any (a plan drafted in prose and repeated in a ```json fence counts once). One is validated against
   ``Plan`` (``schema`` on failure); several are ``several_plans`` with no plan, so hedging never beats the
   best plan alone (the IRD rule of DESIGN.md §5). With none, the error is ``too_deep`` if some object nests
   too deep, else ``schema`` if the first region set holding a ``{`` has an object that decodes, else
   ``bad_json``.

Not looked for: a plan nested in another object (``{"plan": {"jobs": ...}}`` fails as ``schema``). Think
tags and fences are case-sensitive, fence tags are not.

Cost: the usual answer (bare JSON, or one ```json fence) takes one typed msgspec decode (``_fast_path``);
the rest takes the search of step 4, linear in the text: one regex match per bracket skips ordinary
characters and whole strings, each pass remembers where the brackets it sees close, and a ``{`` that a pass
saw inside a string (after a stray ``"``) is scanned again at most ``_MAX_RESCANS`` times (later ones are not
tried). Behaviour is pinned on ~14,000 completions by ``tests/rewards/test_parse_golden.py``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

import msgspec

from fleet_rl.plan_schema import PLAN_JSON_SCHEMA, Plan, plan_from_json, plan_from_object

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "BAD_JSON",
    "MAX_COMPLETION_CHARS",
    "MAX_NESTING",
    "NOT_TEXT",
    "NO_JSON",
    "PARSE_ERRORS",
    "PLAN_JSON_SCHEMA",
    "SCHEMA",
    "SEVERAL_PLANS",
    "TOO_DEEP",
    "TOO_LARGE",
    "ParseResult",
    "completion_text",
    "parse_plan",
]

MAX_COMPLETION_CHARS = 20_000  # a 2-3 job plan is ~150 tokens; 20k chars leaves ample room for reasoning
MAX_NESTING = 32  # a plan nests 4 deep ({jobs: [{precision: {}}]})
_MAX_RESCANS = 8  # a "{" seen inside a string by an earlier pass is scanned again at most this often

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

# The text up to a first </think> that no <think> precedes.
_UNOPENED_THINK = re.compile(r"(?:[^<]++|<(?!/?think>))*+</think>")
# A <think> block; an unclosed one runs to the end of the text.
_THINK_BLOCK = re.compile(r"<think>(?:[^<]++|<(?!/think>))*+(?:</think>|\Z)")
# A fence: ```, its info string (group 1, e.g. "json"), its content (group 2) up to the next ``` or the end.
_FENCE = re.compile(r"```([A-Za-z0-9_+.-]*)((?:[^`]++|`(?!``))*+)(?:```|\Z)")
# Ordinary characters and whole JSON strings (an unclosed one runs to the end), then the next bracket outside
# strings or the end of the text (an empty group); possessive, so each match is linear in what it consumes.
_BRACKET = re.compile(r'(?:[^"{}\[\]]++|"[^"\\]*+(?:\\[\s\S][^"\\]*+)*+"?+)*+([{}\[\]]|\Z)')
_decode_plan = msgspec.json.Decoder(Plan, strict=True).decode  # plan_from_json, with the decoder built once


class ParseResult(msgspec.Struct, frozen=True, gc=False):
    """Outcome of ``parse_plan``; unpacks as ``plan, error, num_candidates = result``.

    ``plan`` is set exactly when ``error`` is None; ``num_candidates`` counts the plan-like objects in the
    chosen region set; ``detail`` explains the error for logs. A frozen msgspec struct builds several times
    faster than a dataclass, and with ``gc=False`` a batch of results (which form no cycle) triggers no
    garbage collection."""

    plan: Plan | None
    error: str | None
    num_candidates: int
    detail: str = ""

    def __iter__(self) -> Iterator[object]:
        return iter((self.plan, self.error, self.num_candidates))


def parse_plan(completion: object) -> ParseResult:
    """Extract the one plan of a completion and validate it strictly against ``Plan``; never raises."""
    text = completion_text(completion)
    if text is None:
        return ParseResult(None, NOT_TEXT, 0, f"expected text or messages, got {type(completion).__name__}")
    if len(text) > MAX_COMPLETION_CHARS:
        return ParseResult(None, TOO_LARGE, 0, f"{len(text)} characters > {MAX_COMPLETION_CHARS}")
    answer = _drop_reasoning(text)
    if "{" not in answer:
        return ParseResult(None, NO_JSON, 0, "no JSON object in the answer")
    json_blocks, bare_blocks = _fenced_blocks(answer)
    whole = [answer]
    return _fast_path(json_blocks or bare_blocks or whole) or _search((json_blocks, bare_blocks, whole))


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


def _drop_reasoning(text: str) -> str:
    """Step 2: the text without a leading unopened ``...</think>`` and without ``<think>`` blocks."""
    if "<" not in text:  # a one-character scan first: many answers hold no tag at all
        return text
    unopened = _UNOPENED_THINK.match(text)
    if unopened:
        text = text[unopened.end() :]
    return _THINK_BLOCK.sub("", text)


def _fenced_blocks(answer: str) -> tuple[list[str], list[str]]:
    """Step 3: the contents of the answer's ```json fences and of its bare ``` fences."""
    json_blocks: list[str] = []
    bare_blocks: list[str] = []
    if "`" in answer:  # a one-character scan first: many answers have no fence
        for tag, content in _FENCE.findall(answer):
            tag = tag.lower()
            if tag == "json":
                json_blocks.append(content)
            elif not tag:
                bare_blocks.append(content)
    return json_blocks, bare_blocks


def _fast_path(regions: list[str]) -> ParseResult | None:
    """Steps 4-5 at the cost of one typed decode per region, when each region of the preferred set holds one
    plan-like JSON object from its first ``{`` to its last ``}`` (``_lone_plan``); else None. Such an object
    is all that step 4 would find: valid JSON balances its brackets outside strings, and no other object
    can start before its first ``{`` or after its last ``}``."""
    results = []
    for region in regions:
        result = _lone_plan(region)
        if result is None:
            return None
        results.append(result)
    return _several(len(results)) if len(results) > 1 else results[0]


def _lone_plan(region: str) -> ParseResult | None:
    """The region's one object, validated, if the text from its first ``{`` to its last ``}`` (with no ``{``
    after it) is a JSON mapping with a ``"jobs"`` key that cannot nest too deep (a ``Plan`` nests 4 deep;
    a mapping failing the schema must hold at most ``MAX_NESTING`` brackets); else None."""
    start = region.find("{")
    end = region.rfind("}") + 1
    if start == -1 or end <= start or region.find("{", end) != -1:
        return None
    candidate = region[start:end]
    try:
        return ParseResult(_decode_plan(candidate), None, 1)
    except msgspec.ValidationError as error:
        if candidate.count("{") + candidate.count("[") <= MAX_NESTING and _has_jobs_key(candidate):
            return _schema_error(error, 1)
    except (msgspec.DecodeError, UnicodeEncodeError):  # lone surrogates cannot be encoded
        pass
    return None


def _has_jobs_key(candidate: str) -> bool:
    try:
        value = msgspec.json.decode(candidate)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return False
    return type(value) is dict and "jobs" in value


def _search(region_sets: tuple[list[str], ...]) -> ParseResult:
    """Steps 4-5 in full: the candidates of the first region set that has any, else the errors found."""
    too_deep = False
    fallback: list[_Found] = []  # found in the first region set with a "{" (at worst the whole answer)
    for regions in region_sets:
        found = [_top_level_objects(region) for region in regions]
        plans = [plan for objects in found for plan in objects.plans]
        if plans:
            return _chosen(plans)
        too_deep = too_deep or any(objects.too_deep for objects in found)
        if not fallback and any("{" in region for region in regions):
            fallback = found
    if too_deep:
        return ParseResult(None, TOO_DEEP, 0, f"an object nests deeper than {MAX_NESTING}")
    other = next((objects.first_other for objects in fallback if objects.first_other is not None), None)
    if other is not None:
        try:
            plan_from_object(other)
        except msgspec.ValidationError as error:
            return _schema_error(error, 0)
    error = next((objects.first_error for objects in fallback if objects.first_error), "")
    return ParseResult(None, BAD_JSON, 0, error or "unbalanced braces: the object never closes")


def _chosen(plans: list[str]) -> ParseResult:
    """Step 5 on the candidates of the chosen region set."""
    if len(plans) > 1:
        return _several(len(plans))
    try:
        return ParseResult(plan_from_json(plans[0]), None, 1)
    except msgspec.ValidationError as error:
        return _schema_error(error, 1)


def _several(count: int) -> ParseResult:
    return ParseResult(None, SEVERAL_PLANS, count, f"{count} plans in one answer")


def _schema_error(error: msgspec.ValidationError, num_candidates: int) -> ParseResult:
    return ParseResult(None, SCHEMA, num_candidates, f"not a valid plan: {error}")


class _Found(NamedTuple):
    """What step 4 finds in one region."""

    plans: list[str]  # the texts of the plan-like objects
    first_other: dict | None  # the first other object that decodes (outside failed spans)
    first_error: str  # the first decode error (outside failed spans)
    too_deep: bool  # an object (outside failed spans) nests deeper than MAX_NESTING


def _top_level_objects(region: str) -> _Found:
    """Step 4 on one region. Each ``{`` from the left is a start:

    - an object that closes (``_ObjectEnds``) and decodes is taken whole, and the scan resumes after it;
    - a ``{`` that never closes or nests too deep, or a span that does not decode, is a failed start, and
      the scan retries from the next ``{``. What it finds inside the failed span (after a ``{`` that never
      closes: up to the end) counts only if plan-like. No retry is made where no plan-like object can start
      (past the last ``"jobs"`` and backslash): the scan resumes after the span, or stops."""
    start = region.find("{")
    if start == -1:
        return _Found([], None, "", False)
    last_marker = max(region.rfind('"jobs"'), region.rfind("\\"))  # no plan-like object starts after it
    if _cut_off(region, start, last_marker):
        return _Found([], None, "", False)
    object_end = _ObjectEnds(region)
    plans: list[str] = []
    first_other: dict | None = None
    first_error = ""
    too_deep = False
    inside_until = 0  # a start before this index lies inside a failed span
    while start != -1:
        if inside_until > len(region) and start > last_marker:
            break  # past a "{" that never closes only plan-like objects count, and none starts here
        end = object_end(start)
        if end is None:  # no start
            start = region.find("{", start + 1)
            continue
        inside = start < inside_until
        if end < 0:  # never closes, or too deep
            too_deep = too_deep or (end == _DEEP and not inside)
            inside_until = len(region) + 1
            start = region.find("{", start + 1)
            continue
        candidate = region[start:end]
        try:
            value = msgspec.json.decode(candidate)
        except (msgspec.DecodeError, UnicodeEncodeError) as error:  # lone surrogates cannot be encoded
            if not inside:
                first_error = first_error or str(error) or type(error).__name__
            if start < last_marker:
                inside_until = max(inside_until, end)
                start = region.find("{", start + 1)
            else:
                start = region.find("{", end)
            continue
        if type(value) is dict and "jobs" in value:
            plans.append(candidate)
        elif not inside and first_other is None:
            first_other = value
        start = region.find("{", end)
    return _Found(plans, first_other, first_error, too_deep)


def _cut_off(region: str, start: int, last_marker: int) -> bool:
    """Whether the scan would stop after its first start without finding anything: the object opened there
    is valid JSON that the end of the text cuts off (an answer truncated at max_completion_length), too
    shallow to nest too deep, and no later start can be plan-like. One C decode instead of a Python pass
    over every bracket of the object (valid JSON up to the cut puts its brackets where the pass sees them)."""
    later = region.find("{", start + 1)
    if later != -1 and later <= last_marker:
        return False
    tail = region[start:]
    if tail.count("{") + tail.count("[") > MAX_NESTING:
        return False
    try:  # the padding ends any literal or number msgspec would read past the end ('{"a": t}' is no cut)
        msgspec.json.decode(tail + _PADDING)
    except msgspec.DecodeError as error:
        return str(error) == _TRUNCATED
    except UnicodeEncodeError:  # lone surrogates cannot be encoded
        return False
    return False


_TRUNCATED = "Input data was truncated"  # msgspec's message for valid JSON that ends inside a value
_PADDING = " " * 8  # whitespace, valid between any two tokens: only an open value stays "truncated"
_DEEP = -2  # an object end: the object nests deeper than MAX_NESTING before it closes


class _ObjectEnds:
    """Where the object opened at a ``{`` of a text ends: the index past its closing bracket, -1 if it never
    closes, ``_DEEP`` if it nests too deep first, or None if the brace is no start (see below).

    A pass from a ``{`` records the end of every bracket it sees outside strings, so most calls cost
    nothing. A ``{`` that a pass went past without seeing it (it was inside a string there: a stray ``"``
    came before it) gets a pass of its own only ``_MAX_RESCANS`` times, and later ones are no starts, so
    the passes cover the text at most ``_MAX_RESCANS + 1`` times."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ends: dict[int, int] = {}
        self.covered = 0  # where the furthest pass stopped
        self.rescans = 0

    def __call__(self, start: int) -> int | None:
        if start not in self.ends:
            if start < self.covered:
                self.rescans += 1
                if self.rescans > _MAX_RESCANS:
                    return None
            self.covered = max(self.covered, self._pass(start))
        return self.ends[start]

    def _pass(self, start: int) -> int:
        """Records the ends of the brackets from the ``{`` at ``start`` to the one closing it (or the end of
        the text), and returns where it stopped. Brackets are not matched by kind (decoding fails on that). A
        scan from a bracket the pass sees sees the same brackets after it, so the stack's bottom entry is the
        one whose own scan would first nest too deep: it is dropped as ``_DEEP``, not ending the pass."""
        stack = [start]
        for match in _BRACKET.finditer(self.text, start + 1):
            if not match[1]:
                break  # the end of the text, still inside the object
            if match[1] in "{[":
                stack.append(match.end() - 1)
                if len(stack) > MAX_NESTING:
                    self.ends[stack.pop(0)] = _DEEP
            else:
                self.ends[stack.pop()] = match.end()
                if not stack:
                    return match.end()
        for index in stack:
            self.ends[index] = -1
        return len(self.text)
