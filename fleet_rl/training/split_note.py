"""The GPU split written out before the plan: one line an imitator writes first, with a running count.

``split_note(plan, free_gpus)`` words a plan's GPUs job by job with the GPUs still free after each:

    GPUs 7: tune 2 (5 left), rag 3 (2 left), support-bot 2 (0 left).

With ``--sft_split_note true`` the warm start's target answers open with this line, then the ```json fence
(``fleet_rl.training.dataset.sft_dataset``); the reward reads the fence and ignores the line
(``rewards/parsing.py``: a ```json fence is preferred to the prose around it).

Why (issue #68): an imitator of the heuristic on ``sized_batching`` gave more GPUs than the cluster has in 12
of its 96 held-out answers (``over_allocated`` in ``python -m benchmarks.learning.fault_causes``; an invalid
plan scores nothing), and the GPU split costs it more than any other field (``python -m
benchmarks.learning.what_if``). Inside the JSON, each ``"gpus"`` sits a job's worth
of keys after the last; the note puts the split in a dozen tokens, where a small model keeps count by copying
the number it just wrote and subtracting a small one, and the JSON then copies each job's count from it.
Measured (SFT seed 0, docs/experiment-log.md): 37.9 % of the optimum against 36.6 % without the note, paired
+1.3 [-5.2, +7.7]; medium 26.0 against 16.4 %, easy 48.0 against 53.7 %; 7 over-allocated answers against 12.

A plan repair (``fleet_rl.training.plan_repairs``) rewrites GPUs inside the JSON; ``renoted`` then rewrites
the note before the fence to the repaired split, so a replayed answer never teaches a note that disagrees
with its plan.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

__all__ = ["free_gpus", "renoted", "split_note", "with_split_note"]

NOTE = re.compile(r"GPUs -?\d+:[^\n]*")  # a split note's line, as written or as sampled


def split_note(plan: Mapping, free_gpus: int) -> str:
    """``plan``'s GPUs per job, in its order, each with the GPUs left of ``free_gpus`` after it."""
    left, words = free_gpus, []
    for part in plan["jobs"]:
        left -= int(part["gpus"])
        words.append(f"{part['id']} {part['gpus']} ({left} left)")
    return f"GPUs {free_gpus}: {', '.join(words)}."


def free_gpus(row: Mapping) -> int:
    """The GPUs a ``scenario_rows`` row's answer may share out: the cluster's, less those of the other
    jobs' given parts on a multi-agent row."""
    count = json.loads(row["scenario"])["cluster"]["count"]
    given = json.loads(row["given_plan"])["jobs"] if row["given_plan"] else []
    return count - sum(int(part.get("gpus", 0)) for part in given if part.get("id") != row["agent"])


def with_split_note(answer: str, plan: Mapping, row: Mapping) -> str:
    """``answer`` (a plan's ```json fence) opened by the plan's ``split_note`` line."""
    return f"{split_note(plan, free_gpus(row))}\n{answer}"


def renoted(text: str, plan: Mapping, free_gpus: int) -> str:
    """``text`` with its split note (the first before the first ``` fence, if any) rewritten to ``plan``'s
    split; ``text`` itself when it has none."""
    fence = text.find("```")
    note = NOTE.search(text, 0, len(text) if fence < 0 else fence)
    if note is None:
        return text
    return text[: note.start()] + split_note(plan, free_gpus) + text[note.end() :]
