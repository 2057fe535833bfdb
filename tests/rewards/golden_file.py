"""Golden files of the reward tests: gzipped JSON lines, a header line then one line per recorded outcome.

``tests/rewards/parse_corpus.py`` and ``tests/rewards/reward_corpus.py`` record their corpus's outcomes with
``write_lines`` and are run as ``python -m tests.rewards.<corpus> --write`` through ``command_line``.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Callable
from pathlib import Path

__all__ = ["command_line", "read_lines", "write_lines"]


def read_lines(path: Path) -> tuple[dict, list[list]]:
    """(the header, the recorded outcomes)."""
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return json.loads(file.readline()), [json.loads(line) for line in file]


def write_lines(path: Path, header: dict, outcomes: list[list]) -> int:
    """Write the file (mtime 0: the same outcomes give the same bytes); return the number of outcomes."""
    lines = [json.dumps(header, separators=(",", ":"))]
    lines += [json.dumps(outcome, separators=(",", ":")) for outcome in outcomes]
    path.parent.mkdir(exist_ok=True)
    with open(path, "wb") as file:
        with gzip.GzipFile(fileobj=file, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
            gz.write(("\n".join(lines) + "\n").encode("utf-8"))
    return len(outcomes)


def command_line(description: str, write: Callable[[], int], path: Path, what: str) -> None:
    """``--write`` records the outcomes with ``write``; without it, the help."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help=f"record the current {what}'s outcomes")
    if parser.parse_args().write:
        print(f"{write()} outcomes written to {path}")
    else:
        parser.print_help()
