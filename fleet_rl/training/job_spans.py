"""Where each job's ``{...}`` object lies in an answer's text: the characters per-job credit and plan
edits work on (``fleet_rl/training/job_credit.py``, ``fleet_rl/training/plan_edits.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

__all__ = ["job_spans"]


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


def job_spans(text: str, job_ids: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{job id: (start, end)}``: the innermost ``{...}`` around the first ``"id": "<job id>"`` of each job
    found in ``text``; a job whose id does not appear inside an object is left out."""
    spans = _object_spans(text)
    found = {}
    for job_id in job_ids:
        match = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(job_id)), text)
        if match is None:
            continue
        around = [span for span in spans if span[0] < match.start() and match.end() <= span[1]]
        if around:
            found[job_id] = min(around, key=lambda span: span[1] - span[0])
    return found
