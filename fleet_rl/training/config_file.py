"""A ``--config`` file checked before anything else runs: missing, unreadable, not YAML, or not a mapping of
option names to values ends the script with one line naming the file and the problem, and exit code 2 (a
usage error, as argparse gives), instead of a traceback from deep inside the parser.

An option retired in issue #69, in the file or as a flag, ends it the same way with the line
``fleet_rl/training/retired_options.py`` gives. Used by ``train_grpo.py``, ``eval.py`` and the learning
benchmarks before their heavy imports; it imports only PyYAML.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from fleet_rl.training.retired_options import retired_option_problem

__all__ = ["config_path", "config_problem", "exit_on_a_bad_config"]


def config_path(argv: list[str]) -> str | None:
    """The value of ``--config PATH`` or ``--config=PATH`` in ``argv`` (the last one given), or None."""
    found = None
    for index, argument in enumerate(argv):
        if argument == "--config" and index + 1 < len(argv):
            found = argv[index + 1]
        elif argument.startswith("--config="):
            found = argument.removeprefix("--config=")
    return found


def config_problem(path: str) -> str | None:
    """What is wrong with the config file at ``path``, in a few words, or None if it is a YAML mapping."""
    return _read_config(path)[1]


def _read_config(path: str) -> tuple[dict | None, str | None]:
    """The config file's mapping and None, or None and what is wrong with the file (``config_problem``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, "no such file"
    except IsADirectoryError:
        return None, "is a directory, not a file"
    except PermissionError:
        return None, "cannot be read (permission denied)"
    except UnicodeDecodeError:
        return None, "cannot be read as UTF-8 text"
    except OSError as error:
        return None, f"cannot be read ({error.strerror or error})"
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        return None, f"not valid YAML{where}: {problem}"
    if not isinstance(config, dict):
        found = "nothing" if config is None else f"a {type(config).__name__}"
        return None, f"holds {found}, not a mapping of option names to values"
    return config, None


def exit_on_a_bad_config(argv: list[str], program: str | None = None) -> None:
    """If ``argv`` names a ``--config`` with a problem, print ``<program>: error: --config <path>: <problem>``
    to stderr and exit with code 2; the same for a retired option in the file or the flags; else return."""
    program = program or Path(sys.argv[0]).name
    path = config_path(argv)
    config, problem = (None, None) if path is None else _read_config(path)
    if problem is not None:
        print(f"{program}: error: --config {path}: {problem}", file=sys.stderr)
        raise SystemExit(2)
    retired = retired_option_problem(config, argv)
    if retired is not None:
        print(f"{program}: error: {retired}", file=sys.stderr)
        raise SystemExit(2)
