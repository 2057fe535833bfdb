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
4. A scanner tries each ``{`` from the left as the start of an object, and finds where it closes, respecting
   JSON strings and escapes (so ``"id": "a}b"`` does not close the object). A balanced object that decodes
   is taken whole; a ``{`` that never closes, nests deeper than ``MAX_NESTING``, or opens a balanced span
   that does not decode (a stray brace in prose, "use {fp8} here", code) is passed over and the next ``{``
   tried, so stray braces never swallow the plan after them; what lies inside such a failed span is used
   only if it is plan-like (it may be a fragment of a broken object). Details in ``_top_level_objects``.
5. Decoded objects that are mappings with a ``"jobs"`` key are the candidates. One candidate is validated
   against ``Plan`` (``schema`` on failure). Several candidates are ``several_plans`` with ``plan=None``:
   hedging with several plans scores as malformed, so it can never beat writing the best plan alone (the IRD
   rule of DESIGN.md §5). Only the chosen region set is counted, so a plan shown in prose and repeated in a
   ```json fence counts once, and the fence is what gets scored. With no candidate, the error is
   ``too_deep`` if some object (not inside a failed span) nests too deep, else ``schema`` if some object
   decodes, else ``bad_json``.

Speed (the reward parses every completion of every GRPO batch; same results, checked against the plain
scanner and the original parser by ``tests/rewards/test_throughput_parsing.py``):

- Fast path: when every region of the preferred set is, between its first ``{`` and its last ``}`` (no
  ``{`` after it), one valid JSON object, that object is all the scanner would find there; it is decoded
  straight to ``Plan`` (a schema failure is confirmed as JSON with a ``"jobs"`` key by one untyped decode),
  and steps 4-5 are skipped. Most answers (bare JSON, or one ```json fence amid prose and reasoning) end
  here, after one typed msgspec decode; the scanner runs only on the rest. ``parse_plan`` handles the usual
  shapes inline (one leading think block, then no fence or one ```json fence) on index ranges of the
  completion, without copying the answer out of it.
- Tags, fences and braces are found by one-character searches; the scanner skips ordinary characters and
  whole strings with one regex match per bracket, and remembers the outcome of every bracket a pass sees
  (where it closes, never, or too deep), so retries from the braces after a failed start do not scan again:
  about one pass over the text, plus at most ``_MAX_RESCANS`` passes from braces an earlier pass saw inside
  a string (a stray ``"``); no input makes it quadratic (``tests/rewards/test_stray_braces.py`` times it).
- A truncated answer (the first object never closes, per msgspec, and no ``"jobs"`` key after its first
  inner ``{``) is known to yield nothing without scanning (``bad_json``; checked before any decode when
  the region runs to the end of the text without a ``}`` in its last characters); a whole-text region that
  merely repeats a region already scanned (an unclosed fence running to the end) is not scanned twice.
- ``ParseResult`` (like the plan structs of ``fleet_rl.plan_schema``) is not tracked by the cyclic garbage
  collector: it forms no reference cycle, and a batch of tracked results would trigger collections.

Simplifications: a plan nested inside another object that decodes (``{"plan": {"jobs": ...}}``) is not
looked for, and fails as ``schema``; think tags and fences are matched case-sensitively; a fence's content
ends at the next ``` (an unclosed fence runs to the end of the text).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

import msgspec

from fleet_rl.plan_schema import PLAN_JSON_SCHEMA, Plan, plan_from_json, plan_from_object

# plan_from_json's strict typed decoding, with the decoder built once
_decode_plan = msgspec.json.Decoder(Plan, strict=True).decode

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

# Consistency codes (check_against_scenario).
UNKNOWN_JOB = "unknown_job"  # a plan entry whose id is not a job of the scenario
DUPLICATE_JOB = "duplicate_job"  # an id planned more than once
MISSING_JOB = "missing_job"  # a scenario job with no plan entry
SCENARIO_ERRORS: tuple[str, ...] = (UNKNOWN_JOB, DUPLICATE_JOB, MISSING_JOB)

_THINK_OPEN = "<think>"
_THINK_CLOSE = "</think>"
_FENCE = "```"
_FENCE_TAG = re.compile(r"[A-Za-z0-9_+.-]*")  # the info string right after ```, e.g. "json"
_FENCE_TAG_CHAR = re.compile(r"[A-Za-z0-9_+.-]")
_JSON_FENCE = "```json"
_JSON_FENCE_LINE = "```json\n"
# Ordinary characters and whole JSON strings (backslash escapes inside; an unclosed string runs to the end),
# then the next bracket outside strings, or the end of the text (an empty group). Possessive quantifiers:
# no backtracking, so each match is linear in what it consumes.
_BRACKET = re.compile(r'(?:[^"{}\[\]]++|"[^"\\]*+(?:\\[\s\S][^"\\]*+)*+"?+)*+([{}\[\]]|\Z)')


class ParseResult(msgspec.Struct, frozen=True, gc=False):
    """Outcome of ``parse_plan``. Unpacks as three values: ``plan, error, num_candidates = result``.

    ``plan`` is set exactly when ``error`` is None. ``num_candidates`` counts the plan-like objects (decoded
    mappings with a ``"jobs"`` key) in the chosen region. ``detail`` explains the error for humans and logs;
    it is not part of the unpacking. Immutable, compared by value; a frozen msgspec struct rather than a
    dataclass because it is built once per completion and a struct builds several times faster.
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


def _find(text: str, needle: str, position: int = 0) -> int:
    """``text.find(needle, position)``, by a one-character (memchr) search for the needle's first character:
    several times faster than CPython's substring search on answers where that character is rare."""
    first = needle[0]
    while True:
        index = text.find(first, position)
        if index == -1 or text.startswith(needle, index):
            return index
        position = index + 1


def _strip_think(text: str) -> str:
    """Drop ``<think>...</think>`` blocks, a leading unopened ``...</think>``, an unclosed ``<think>...``."""
    if text.startswith(_THINK_OPEN):  # the usual shape: one block first, then the answer
        end = _find(text, _THINK_CLOSE, len(_THINK_OPEN))
        if end == -1:
            return ""
        rest = text[end + len(_THINK_CLOSE) :]
        if "<" not in rest:
            return rest
    first_open = _find(text, _THINK_OPEN)
    first_close = _find(text, _THINK_CLOSE)
    position = 0
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        position = first_close + len(_THINK_CLOSE)
    kept = []
    start = first_open if first_open >= position else _find(text, _THINK_OPEN, position)
    while True:
        if start == -1:
            kept.append(text[position:])
            break
        kept.append(text[position:start])
        end = _find(text, _THINK_CLOSE, start + len(_THINK_OPEN))
        if end == -1:
            break
        position = end + len(_THINK_CLOSE)
        start = _find(text, _THINK_OPEN, position)
    return "".join(kept)


def _one_json_fence(text: str) -> tuple[int, int]:
    """The usual shape: the first backtick opens a ```json fence, which is closed, and no backtick follows.
    Then ``_fenced_blocks(text) == ([text[lo:hi]], [])`` and this returns ``(lo, hi)``; else ``(-1, -1)``."""
    start = text.find("`")
    if text.startswith(_JSON_FENCE, start) and not _FENCE_TAG_CHAR.match(text, start + len(_JSON_FENCE)):
        end = text.find("`", start + len(_JSON_FENCE))
        if end != -1 and text.startswith(_FENCE, end) and text.find("`", end + len(_FENCE)) == -1:
            return start + len(_JSON_FENCE), end
    return -1, -1


def _fenced_blocks(text: str) -> tuple[list[str], list[str]]:
    """Contents of ```json fences and of bare ``` fences (other languages are left to the whole-text scan)."""
    json_blocks: list[str] = []
    bare_blocks: list[str] = []
    position = 0
    while True:
        start = _find(text, _FENCE, position)
        if start == -1:
            break
        tag_end = _FENCE_TAG.match(text, start + len(_FENCE)).end()
        tag = text[start + len(_FENCE) : tag_end].lower()
        end = _find(text, _FENCE, tag_end)
        body = text[tag_end:] if end == -1 else text[tag_end:end]
        if tag == "json":
            json_blocks.append(body)
        elif not tag:
            bare_blocks.append(body)
        if end == -1:
            break
        position = end + len(_FENCE)
    return json_blocks, bare_blocks


_DEEP = -2  # in bracket ends: a scan from this bracket nests deeper than MAX_NESTING before it closes


def _bracket_ends(text: str, start: int) -> tuple[dict[int, int], int]:
    """One pass from the object opened at ``text[start] == "{"``: for every bracket it sees outside strings
    (that one included), by index, what a scan from that bracket alone finds: the index just past the bracket
    that closes it, -1 if it never closes, or ``_DEEP`` if it nests deeper than ``MAX_NESTING`` first; and
    where the pass stops (the index past the bracket that empties its stack, or the end of the text).

    ``_BRACKET`` skips, in C, the run of ordinary characters and whole JSON strings before the next bracket
    outside strings, so the Python loop runs once per bracket. Brackets are not matched by kind (a mismatch
    fails decoding later). A scan from a bracket the pass sees sees the same brackets after it (both start
    outside strings), at depths relative to it: so the stack's bottom entry is the one whose own scan would
    first go too deep, and it is dropped as ``_DEEP`` rather than ending the pass. The entries answer
    retries from inner brackets without scanning again."""
    ends: dict[int, int] = {}
    stack = [start]
    for match in _BRACKET.finditer(text, start + 1):
        char = match[1]
        if not char:
            break  # the end of the text, still inside the object
        if char in "{[":
            stack.append(match.end() - 1)
            if len(stack) > MAX_NESTING:
                ends[stack.pop(0)] = _DEEP
        else:
            end = match.end()
            ends[stack.pop()] = end
            if not stack:
                return ends, end
    for index in stack:
        ends[index] = -1
    return ends, len(text)


_TRUNCATED = "Input data was truncated"  # msgspec's message when the input ends inside a value


def _truncated_without_plans(text: str, first: int) -> bool:
    """A shortcut for a truncated answer: true when the scan of ``text`` would find nothing to report, because
    the object opened at ``text[first]`` never closes (every later object then follows an unclosed brace)
    and no later object can be plan-like. Checked without the scanner:

    - msgspec says ``text[first:]`` ends inside a value: up to where it stopped, the text is valid JSON, whose
      brackets nest and strings close as the scanner sees them, with the first object still open; and no
      ``}``/``]`` in the last five characters (the longest literal msgspec may have been waiting for), so
      nothing after that point closes it;
    - at most ``MAX_NESTING`` brackets, so no scan can find the text too deep;
    - no backslash, so a ``"jobs"`` key is spelled literally, and none at or after the second ``{``, where
      every later object starts."""
    if "\\" in text or "}" in text[-5:] or "]" in text[-5:]:
        return False
    second = text.find("{", first + 1)
    if second != -1 and text.find('"jobs"', second) != -1:
        return False
    if text.count("{", first) + text.count("[", first) > MAX_NESTING:
        return False
    try:
        msgspec.json.decode(text[first:])
    except msgspec.DecodeError as error:
        return str(error) == _TRUNCATED
    except UnicodeEncodeError:
        return False
    return False


def _top_level_objects(
    text: str, max_rescans: int = _MAX_RESCANS
) -> tuple[list[str], list[object], str, bool, bool]:
    """Step 4-5 on one region: (plan-like object texts, the other decoded objects, the first decode error,
    whether some object nests too deep, whether any ``{`` occurs).

    Each ``{`` from the left is a candidate start, scanned to its closing bracket (see ``_bracket_ends``):

    - a balanced object that decodes is taken whole (nothing inside it is a start) and the scan resumes
      after it: a plan-like one (a mapping with a ``"jobs"`` key) is a candidate plan, another an "other";
    - a ``{`` that never closes or nests too deep (a stray brace in prose, a truncated or too deep object),
      or a balanced span that does not decode (prose "use {fp8} here", ``{ ... {plan} ... }``), is a failed
      start: the scan retries from the next ``{``, so a stray brace never swallows the plan after it. What is
      found inside a failed span (after a ``{`` that never closes: up to the end) may be a fragment of a
      broken object (its ``"precision"`` map, say) and is used only if plan-like; the errors are the failed
      starts' that are not themselves inside one.
    - Retries are skipped when no plan-like object can follow (no ``"jobs"`` key and no backslash escape
      after the failed ``{``): inside a span that does not decode the scan resumes after it; after a ``{``
      that never closes it stops.

    Cost: the passes of ``_bracket_ends`` record the outcome of every bracket they see, so a retry from one of
    them costs nothing; otherwise a pass starts only where no earlier pass reached, and those passes cover the
    text about once. A ``{`` that an earlier pass saw inside a string (after a stray ``"`` in prose) is
    scanned again, at most ``max_rescans`` times (later such braces are no starts): O((max_rescans + 1) · n)
    in all, plus the decodes, each of a balanced span at most ``MAX_NESTING`` deep, so no character is
    decoded more than ``MAX_NESTING`` times per pass.
    """
    start = text.find("{")
    if start == -1:
        return [], [], "", False, False
    if _truncated_without_plans(text, start):
        return [], [], "", False, True
    # a plan-like object starting at index i holds a '"jobs"' key or a backslash escape after i
    last_marker = max(text.rfind('"jobs"'), text.rfind("\\"))
    plan_like: list[str] = []
    others: list[object] = []
    first_error = ""
    too_deep = False
    known: dict[int, int] = {}  # bracket outcomes from every pass so far (_bracket_ends)
    covered = 0  # where the furthest pass stopped
    rescans = 0
    inside_until = 0  # a start before this index lies inside a failed span
    size = len(text)
    while start != -1:
        end = known.get(start)
        if end is None:
            if start < covered:  # a pass went past this "{" and saw it inside a string
                rescans += 1
                if rescans > max_rescans:  # no more rescans: such a "{" is no start
                    start = text.find("{", start + 1)
                    continue
            ends, stop = _bracket_ends(text, start)
            known.update(ends)
            covered = max(covered, stop)
            end = ends[start]
        inside = start < inside_until
        if end < 0:  # never closes, or too deep
            if end == _DEEP and not inside:
                too_deep = True
            if last_marker <= start:
                break
            inside_until = size + 1
            start = text.find("{", start + 1)
            continue
        candidate = text[start:end]
        try:
            value = msgspec.json.decode(candidate)
        except (msgspec.DecodeError, UnicodeEncodeError) as error:  # lone surrogates cannot be encoded
            if not inside:
                first_error = first_error or str(error) or type(error).__name__
            if last_marker > start:
                inside_until = max(inside_until, end)
                start = text.find("{", start + 1)
            else:
                start = text.find("{", end)
            continue
        if type(value) is dict and "jobs" in value:
            plan_like.append(candidate)
        elif not inside:
            others.append(value)
        start = text.find("{", end)
    return plan_like, others, first_error, too_deep, True


def _scan_region_set(regions: list[str]) -> tuple[list[str], list[object], str, bool, bool]:
    """``_top_level_objects`` over a set of regions, merged."""
    plan_like: list[str] = []
    others: list[object] = []
    first_error = ""
    too_deep = saw_brace = False
    for region in regions:
        found, other, error, deep, saw = _top_level_objects(region)
        plan_like += found
        others += other
        first_error = first_error or error
        too_deep = too_deep or deep
        saw_brace = saw_brace or saw
    return plan_like, others, first_error, too_deep, saw_brace


def _schema_detail(error: Exception) -> str:
    return f"not a valid plan: {error}"


_NO_JSON = ParseResult(None, NO_JSON, 0, "no JSON object in the answer")  # frozen: one shared instance
_NEVER_CLOSES = "unbalanced braces: the object never closes"
_UNCLOSED = ParseResult(None, BAD_JSON, 0, _NEVER_CLOSES)


def _answer(completion: object) -> tuple[str | None, ParseResult | None]:
    """Steps 1-2: (the answer text with reasoning dropped, None), or (None, the failure)."""
    text = completion if type(completion) is str else completion_text(completion)
    if text is None:
        return None, ParseResult(
            None, NOT_TEXT, 0, f"expected text or messages, got {type(completion).__name__}"
        )
    if len(text) > MAX_COMPLETION_CHARS:
        return None, ParseResult(None, TOO_LARGE, 0, f"{len(text)} characters > {MAX_COMPLETION_CHARS}")
    if "<" in text:  # a one-character scan first: most answers have no think tag at all
        text = _strip_think(text)
    return text, None


def _only_object(text: str, lo: int, hi: int) -> tuple[Plan | None, msgspec.ValidationError | None] | None:
    """The fast path of steps 4-5 for the region ``text[lo:hi]``: ``(plan, None)`` or ``(None, schema
    error)`` when the region's only top-level object is plan-like, else None (the scanner decides).

    With ``{`` first found at ``start``, ``}`` last found at ``end`` and no ``{`` after ``end``, when
    ``text[start:end + 1]`` is valid JSON its brackets balance outside strings, so it is exactly the one
    object the scanner finds, and nothing after it can open another. It is plan-like when it decodes as a
    ``Plan`` (at most 4 deep) or, failing the schema, as a mapping with a ``"jobs"`` key holding at most
    ``MAX_NESTING`` brackets in all (so the scanner could not find it too deep)."""
    start = text.find("{", lo, hi)
    if start == -1:
        return None
    end = text.rfind("}", start, hi)
    if end == -1 or text.find("{", end, hi) != -1:
        return None
    candidate = text[start : end + 1]
    try:
        return _decode_plan(candidate), None
    except msgspec.ValidationError as error:  # the candidate may still be malformed further on
        return (None, error) if _plan_like(candidate) else None
    except (msgspec.DecodeError, UnicodeEncodeError):  # lone surrogates cannot be encoded
        return None


def _plan_like(candidate: str) -> bool:
    """For an object (between its first ``{`` and last ``}``) that failed the schema: whether it is one JSON
    mapping with a ``"jobs"`` key holding at most ``MAX_NESTING`` brackets in all (so the scanner would find
    it, and not too deep)."""
    if candidate.count("{") + candidate.count("[") > MAX_NESTING:
        return False
    try:
        value = msgspec.json.decode(candidate)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return False
    return isinstance(value, dict) and "jobs" in value


def _one_result(found: tuple[Plan | None, msgspec.ValidationError | None]) -> ParseResult:
    plan, error = found
    if plan is None:
        return ParseResult(None, SCHEMA, 1, _schema_detail(error))
    return ParseResult(plan, None, 1)


def parse_plan(completion: object) -> ParseResult:
    """Extract the one plan of a completion and validate it strictly against ``Plan``; never raises."""
    text = completion if type(completion) is str else completion_text(completion)
    if text is None or len(text) > MAX_COMPLETION_CHARS:
        return _answer(completion)[1]
    # Step 2 in place: the answer is text[base:] (not copied out in the usual shapes).
    base = 0
    if "<" in text:  # a one-character scan first: most answers have no think tag at all
        if text.startswith(_THINK_OPEN):  # the usual shape: one block first, then the answer
            close = _find(text, _THINK_CLOSE, len(_THINK_OPEN))
            if close == -1:  # the answer never started
                return _NO_JSON
            base = close + len(_THINK_CLOSE)
        if not base or text.find("<", base) != -1:  # any other shape: the general rule
            text, base = _strip_think(text), 0
    # Fast path (``_only_object``, inlined): the preferred region holds exactly one plan-like object.
    tick = text.find("`", base)
    if tick == -1:  # no fence: the whole answer is the region
        start = text.find("{", base)
        if start == -1:
            return _NO_JSON
        lo, hi = base, len(text)
    elif text.startswith(_JSON_FENCE_LINE, tick) or (
        text.startswith(_JSON_FENCE, tick) and not _FENCE_TAG_CHAR.match(text, tick + len(_JSON_FENCE))
    ):  # the first backtick opens a ```json fence: the usual shape if it is the only fence
        lo = tick + len(_JSON_FENCE)
        hi = text.find("`", lo)
        if hi == -1:  # it never closes: its content runs to the end
            hi = len(text)
        elif not text.startswith(_FENCE, hi) or text.find("`", hi + len(_FENCE)) != -1:
            return _fenced(text[base:] if base else text)
        start = text.find("{", lo, hi)
        if start == -1 and text.find("{", base) == -1:  # no region holds a brace
            return _NO_JSON
    elif text.find("{", base) == -1:
        return _NO_JSON
    else:
        return _fenced(text[base:] if base else text)
    if start != -1:
        end = text.rfind("}", start, hi)
        if (
            hi == len(text)
            and end < hi - 5
            and (tick == -1 or text.find("{", base, tick) == -1)
            and _truncated_without_plans(text[lo:], start - lo)
        ):
            # The region runs to the end of the text (no fence, or an unclosed one), holds the answer's first
            # brace and ends without a "}" in its last 5 characters: it is truncated, with no plan after it,
            # so the scanner finds nothing (checked before trying to decode its first object).
            return _UNCLOSED
        if end != -1 and text.find("{", end, hi) == -1:
            candidate = text[start : end + 1]
            try:
                return ParseResult(_decode_plan(candidate), None, 1)
            except msgspec.ValidationError as error:  # the candidate may still be malformed further on
                if _plan_like(candidate):
                    return ParseResult(None, SCHEMA, 1, _schema_detail(error))
            except (msgspec.DecodeError, UnicodeEncodeError):  # lone surrogates cannot be encoded
                pass
    answer = text[base:] if base else text
    return _scan(answer, [], []) if tick == -1 else _scan(answer, [text[lo:hi]], [])


def _fenced(text: str) -> ParseResult:
    """``parse_plan`` of an answer with fences other than one closing ```json fence (``text`` has a brace)."""
    json_blocks, bare_blocks = _fenced_blocks(text)
    regions = json_blocks or bare_blocks or [text]
    for region in regions:
        found = _only_object(region, 0, len(region))
        if found is None:
            return _scan(text, json_blocks, bare_blocks)
    if len(regions) > 1:
        return ParseResult(None, SEVERAL_PLANS, len(regions), f"{len(regions)} plans in one answer")
    return _one_result(found)


def _parse_plan_scanner(completion: object) -> ParseResult:
    """``parse_plan`` without the fast path (the reference the tests compare the fast path with)."""
    text, failure = _answer(completion)
    if failure is not None:
        return failure
    json_blocks, bare_blocks = _fenced_blocks(text)
    return _scan(text, json_blocks, bare_blocks)


def _scans_like_a_suffix(text: str, *region_sets: list[str]) -> bool:
    """Whether scanning ``text`` would repeat the scan of a one-region set already scanned: true when that
    region is ``text``'s suffix (an unclosed fence runs to the end) and no ``{`` precedes it, so the scanner
    starts at the same ``{`` and sees the same characters from there on."""
    for regions in region_sets:
        if len(regions) == 1:
            region = regions[0]
            if text.endswith(region) and text.find("{", 0, len(text) - len(region)) == -1:
                return True
    return False


def _scan(text: str, json_blocks: list[str], bare_blocks: list[str]) -> ParseResult:
    """Steps 3-5 with the scanner, over every region set in order of preference."""
    first_braced: tuple[list[object], str] | None = None
    plan_like: list[str] = []
    too_deep = False
    whole = [text]
    for regions in (json_blocks, bare_blocks, whole):
        if not regions:
            continue
        if regions is whole and _scans_like_a_suffix(text, json_blocks, bare_blocks):
            continue  # the same scan again: no plan-like object, and its brace is already counted
        plan_like, others, decode_error, deep, saw_brace = _scan_region_set(regions)
        if plan_like:
            break
        too_deep = too_deep or deep
        if saw_brace and first_braced is None:
            first_braced = (others, decode_error)
    if not plan_like:
        if too_deep:
            return ParseResult(None, TOO_DEEP, 0, f"an object nests deeper than {MAX_NESTING}")
        if first_braced is None:
            return _NO_JSON
        others, decode_error = first_braced
        if others:
            try:
                plan_from_object(others[0])
            except msgspec.ValidationError as error:
                return ParseResult(None, SCHEMA, 0, _schema_detail(error))
        return ParseResult(None, BAD_JSON, 0, decode_error or _NEVER_CLOSES)
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
