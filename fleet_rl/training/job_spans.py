"""Where each job's ``{...}`` object lies in an answer's text: the characters per-job credit and plan
repairs work on (``fleet_rl/training/job_credit.py``, ``fleet_rl/training/plan_repairs.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = ["id_objects", "job_spans"]

_ID_VALUE = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.)*")')  # an "id" key and its JSON string


def _object_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) character span of every balanced ``{...}`` in ``text``, braces in JSON strings
    ignored; unbalanced braces open or close nothing."""
    spans, open_braces = [], []
    in_string = escaped = False
    for position, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            open_braces.append(position)
        elif char == "}" and open_braces:
            spans.append((open_braces.pop(), position + 1))
    return spans


def _innermost(spans: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The shortest of ``spans`` that holds characters ``start`` to ``end``, or None."""
    around = [span for span in spans if span[0] < start and end <= span[1]]
    return min(around, key=lambda span: span[1] - span[0]) if around else None


def id_objects(text: str) -> list[tuple[str, tuple[int, int]]]:
    """Every ``"id": "<string>"`` in ``text`` inside an object, in text order, with the innermost ``{...}``
    around it: ``(id, (start, end))``. An answer's job objects, its invented and repeated ones included."""
    spans = _object_spans(text)
    found = []
    for match in _ID_VALUE.finditer(text):
        try:
            job_id = json.loads(match.group(1))
        except json.JSONDecodeError:  # an escape JSON does not know: not an id the kernel could read
            continue
        around = _innermost(spans, match.start(), match.end())
        if around is not None:
            found.append((job_id, around))
    return found


def job_spans(text: str, job_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{job id: (start, end)}``: the innermost ``{...}`` around the first ``"id": "<job id>"`` of each job
    found in ``text``; a job whose id does not appear inside an object is left out."""
    spans = _object_spans(text)
    found = {}
    for job_id in job_ids:
        match = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(job_id)), text)
        if match is None:
            continue
        around = _innermost(spans, match.start(), match.end())
        if around is not None:
            found[job_id] = around
    return found
