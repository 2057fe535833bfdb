"""A policy's kept held-out answers, as the commands that analyse them (``fault_causes``, ``what_if``) read
them.

Their argument is one evaluation the learning benchmark or the SFT curve keeps under
``<work_dir>/start-evaluations/`` (its ``key`` holds the evaluation settings, so the held-out rows are
rebuilt exactly as they were asked), or a seed's result ``<work_dir>/seed-N/learning_seed.json``, whose
``--policy`` (``after``, the default, or ``start``) is read with the settings of its fingerprint.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["analysis_parser", "print_analysis", "settings_and_answers"]


def settings_and_answers(evaluation_file: dict, policy: str) -> tuple[dict, list[str]]:
    """The evaluation settings and the answers of a kept evaluation, or of a seed result's ``policy``."""
    if "key" in evaluation_file:
        return evaluation_file["key"]["settings"], evaluation_file["evaluation"]["completions"]
    return evaluation_file["fingerprint"]["settings"], evaluation_file[policy]["completions"]


def analysis_parser(description: str) -> argparse.ArgumentParser:
    """A command's parser with the evaluation argument and ``--policy``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "evaluation",
        help="a kept evaluation, <work_dir>/start-evaluations/<key>.json, or a seed's result, "
        "<work_dir>/seed-N/learning_seed.json",
    )
    parser.add_argument(
        "--policy", choices=("after", "start"), default="after", help="which answers of a seed's result"
    )
    return parser


def print_analysis(prog: str, evaluation: str, analyse: Callable[[dict], dict]) -> dict:
    """Read the evaluation file, print ``analyse``'s result as JSON and return it; a file that cannot be
    read or is not an evaluation of today's rows ends the command with one line naming it."""
    try:
        result = analyse(json.loads(Path(evaluation).read_text()))
    except (OSError, KeyError, ValueError) as error:
        sys.exit(f"{prog}: error: {evaluation}: {error}")
    print(json.dumps(result, indent=1))
    return result
