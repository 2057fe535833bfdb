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
  whole strings with one regex match per bracket, and remembers where inner objects end, so retries after
  an unclosed ``{`` do not scan again.
- A truncated answer (the first object never closes, per msgspec, and no ``"jobs"`` key after its first
  inner ``{``) is known to yield nothing without scanning (``bad_json``; checked before any decode when
  the region runs to the end of the text without a ``}`` in its last characters); a whole-text region that
  merely repeats a region already scanned (an unclosed fence running to the end) is not scanned twice.
- ``ParseResult`` (like the plan structs of ``fleet_rl.plan_schema``) is not tracked by the cyclic garbage
  collector: it forms no reference cycle, and a batch of tracked results would trigger collections.

Simplifications: a plan nested inside another object (``{"plan": {"jobs": ...}}``) is not looked for and
fails as ``schema``; think tags and fences are matched case-sensitively; a fence's content ends at the next
``` (an unclosed fence runs to the end of the text).
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


class _TooDeep(Exception):
    pass


def _bracket_ends(text: str, start: int) -> dict[int, int]:
    """Where the object opened at ``text[start] == "{"`` ends (the index just past it, or -1 if it never
    closes), and the same for every bracket opened inside it, by index. Raises ``_TooDeep``.

    ``_BRACKET`` skips, in C, the run of ordinary characters and whole JSON strings before the next bracket
    outside strings, so the Python loop runs once per bracket. Brackets are not matched by kind (a mismatch
    fails decoding later). The inner entries answer a retry from an inner ``{`` without scanning again: from
    a bracket outside strings, a scan sees the same brackets, at a depth no greater than here."""
    ends: dict[int, int] = {}
    stack = [start]
    for match in _BRACKET.finditer(text, start + 1):
        char = match[1]
        if not char:
            break  # the end of the text, still inside the object
        if char in "{[":
            stack.append(match.end() - 1)
            if len(stack) > MAX_NESTING:
                raise _TooDeep
        else:
            ends[stack.pop()] = match.end()
            if not stack:
                return ends
    for index in stack:
        ends[index] = -1
    return ends


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


def _top_level_objects(text: str) -> tuple[list[tuple[str, bool]], bool]:
    """Top-level balanced ``{...}`` substrings, each with whether it follows an unclosed ``{``; and whether
    any ``{`` occurs. Raises ``_TooDeep``.

    An unclosed ``{`` (a stray brace in prose, or a truncated object) is retried from the next character at
    most ``_MAX_RESTARTS`` times, so the scan stays linear in ``len(text)``. Objects found after such a retry
    may be fragments of a truncated object (its ``"precision"`` map, say), so callers use them only if they
    are plan-like.
    """
    first = text.find("{")
    if first != -1 and _truncated_without_plans(text, first):
        return [], True
    objects: list[tuple[str, bool]] = []
    restarts = 0
    position = 0
    saw_brace = False
    known: dict[int, int] = {}  # bracket ends from the last scan (_bracket_ends)
    while True:
        start = text.find("{", position)
        if start == -1:
            break
        saw_brace = True
        end = known.get(start)
        if end is None:
            known = _bracket_ends(text, start)
            end = known[start]
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
    whole = [text]
    try:
        for regions in (json_blocks, bare_blocks, whole):
            if not regions:
                continue
            if regions is whole and _scans_like_a_suffix(text, json_blocks, bare_blocks):
                continue  # the same scan again: no plan-like object, and its brace is already counted
            plan_like, others, decode_error, saw_brace = _scan_region_set(regions)
            if plan_like:
                break
            if saw_brace and first_braced is None:
                first_braced = (others, decode_error)
    except _TooDeep:
        return ParseResult(None, TOO_DEEP, 0, f"an object nests deeper than {MAX_NESTING}")
    if not plan_like:
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
