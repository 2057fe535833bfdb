"""Every command in the README and docs/ names things that exist.

The fenced shell blocks (```bash, ```sh, ```console, ```shell) of README.md and docs/*.md are read command by
command (``\\`` continuations joined, ``&&`` / ``;`` split). For each ``python SCRIPT ...``, ``python -m
MODULE ...``, ``accelerate launch ... SCRIPT ...`` and ``bash .ci/run``:

- the script or module exists;
- every ``--config`` / ``--config_file`` file, and every argument that names a file of this repository
  (``configs/...``, ``benchmarks/...``), exists;
- every ``--flag`` is an option of the script's own parser, spelled exactly (no abbreviations), and a value
  given to an option with choices is one of them. The parsers are taken from the scripts themselves,
  without running them: a child process runs each script as ``__main__`` with ``ArgumentParser
  .parse_known_args`` patched to hand back the parser instead of parsing (``argparse`` scripts such as
  ``benchmarks/*.py``, and ``TrlParser`` ones, ``train_grpo.py`` and ``eval.py``, whose flags are the fields
  of their dataclasses). One child process serves every script, once per test session.

A trailing comment marks what cannot or must not be checked, visibly in the docs:

- ``# needs a GPU`` and ``# placeholder``: the command is skipped, with that reason (``pytest -rs`` lists
  them);
- ``# ran at <commit>`` (7 to 40 hex digits): a command of the experiment log as it ran at that commit
  (``git checkout <commit>`` runs it); skipped, since its options may since have been retired;
- ``# flags passed on to SCRIPT``: flags the command's script does not know are checked against SCRIPT's
  parser instead (``python -m benchmarks.learning`` hands them to ``train_grpo.py``); without that mark such
  a flag fails.

Other commands (``pip``, ``vllm serve``, ``transformers serve``, ``mkdir``...) are not ours to check; they
are counted in ``test_the_docs_hold_commands_to_check``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_FENCES = {"bash", "sh", "console", "shell"}
SKIP_MARKS = {"needs a GPU": "needs a GPU", "placeholder": "holds a placeholder"}
RAN_AT = re.compile(r"\bran at ([0-9a-f]{7,40})\b")
RAN_AT_REASON = "a command of an earlier commit; its options may be retired"
OUR_PACKAGES = ("fleet_rl", "rewards", "benchmarks")
PASS_ON = re.compile(r"flags passed on to (\S+\.py)")
REPO_DIRS = (
    "configs/",
    "benchmarks/",
    "examples/",
    "constraints/",
    "tests/",
    "docs/",
    "fleet_rl/",
    "rewards/",
)
PYTHON = re.compile(r"^(\S*/)?python(3(\.\d+)?)?$")


@dataclass
class Command:
    doc: str
    line: int
    text: str  # the command without its comment
    comment: str
    tokens: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def shell_blocks(path: Path) -> list[tuple[int, list[str]]]:
    """(line number of the first line, lines) of each fenced shell block."""
    blocks, lines, start, inside = [], path.read_text().splitlines(), 0, False
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not inside and stripped.startswith("```") and stripped[3:].strip() in SHELL_FENCES:
            inside, start, body = True, number + 1, []
        elif inside and stripped.startswith("```"):
            inside = False
            blocks.append((start, body))
        elif inside:
            body.append(line)
    return blocks


def split_comment(line: str) -> tuple[str, str]:
    """The command and its trailing ``# comment`` (a ``#`` that starts a shell word, outside quotes)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def commands(path: Path) -> list[Command]:
    found = []
    for start, body in shell_blocks(path):
        pending, first, comment = "", 0, ""
        for offset, raw in enumerate(body):
            line = raw.strip()
            if line.startswith("$ "):
                line = line[2:]
            text, line_comment = split_comment(line)
            if not pending:
                first, comment = start + offset, ""
            comment = line_comment or comment
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            text, pending = pending + text, ""
            if not text.strip():
                continue
            for part in re.split(r"\s(?:&&|;|\|\|)\s", text):
                tokens = shlex.split(part)
                if tokens and tokens[-1] == "&":
                    tokens = tokens[:-1]
                while tokens and (
                    re.match(r"^[A-Z_][A-Z0-9_]*=", tokens[0]) or tokens[0] in ("time", "exec")
                ):
                    tokens = tokens[1:]
                if tokens:
                    found.append(Command(path.relative_to(REPO).as_posix(), first, part, comment, tokens))
    return found


def target(command: Command) -> tuple[str, str, list[str]] | None:
    """("script", path, args), ("module", name, args), ("ci", path, []) or None: not a command of ours."""
    tokens = command.tokens
    if PYTHON.match(tokens[0]) and len(tokens) > 1:
        if tokens[1] == "-m" and len(tokens) > 2:
            return "module", tokens[2], tokens[3:]
        if not tokens[1].startswith("-"):
            return "script", tokens[1], tokens[2:]
    if tokens[:2] == ["accelerate", "launch"]:
        scripts = [i for i, token in enumerate(tokens) if token.endswith(".py")]
        if scripts:
            return "script", tokens[scripts[0]], tokens[2 : scripts[0]] + tokens[scripts[0] + 1 :]
    if tokens[0] == "bash" and len(tokens) > 1 and tokens[1].startswith(".ci/"):
        return "ci", tokens[1], tokens[2:]
    return None


ALL_COMMANDS = [command for doc in DOCS for command in commands(doc)]
OUR_COMMANDS = [command for command in ALL_COMMANDS if target(command)]


# --- the parsers, from a child process ------------------------------------------------------------------


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def _options(parser: argparse.ArgumentParser) -> dict:
    return {
        "kind": "trl" if type(parser).__name__ == "TrlParser" else "argparse",
        "options": {
            option: None if action.choices is None else [str(choice) for choice in action.choices]
            for option, action in parser._option_string_actions.items()
        },
    }


def _dump_parsers(targets: list[str]) -> dict:
    """In the child process: run each ``script:PATH`` / ``module:NAME`` as __main__ up to its parser."""

    def capture(self, args=None, namespace=None):
        raise _Captured(self)

    argparse.ArgumentParser.parse_known_args = capture  # type: ignore[method-assign]
    result = {}
    for spec in targets:
        kind, name = spec.split(":", 1)
        sys.argv = [name]
        try:
            if kind == "script":
                runpy.run_path(str(REPO / name), run_name="__main__")
            else:
                runpy.run_module(name, run_name="__main__", alter_sys=True)
            result[spec] = {"error": "ran to the end without parsing any arguments"}
        except _Captured as captured:
            result[spec] = _options(captured.parser)
        except BaseException as error:  # noqa: BLE001 - report whatever stopped it
            result[spec] = {"error": f"{type(error).__name__}: {error}"}
    return result


SELF_TEST = (
    "script:train_grpo.py",
    "script:eval.py",
    "module:benchmarks.learning",
    "module:fleet_rl.server",
)


@cache
def parsers() -> dict:
    """Every needed parser, read once per session; a failure is remembered too, so that one slow or broken
    child process fails each test at once instead of being started again by every test."""
    needed = set(SELF_TEST)
    for command in OUR_COMMANDS:
        kind, name, args = target(command)
        ours = (REPO / name).is_file() if kind == "script" else name.split(".")[0] in OUR_PACKAGES
        if kind != "ci" and ours and any(arg.startswith("--") for arg in args) and not skip_reason(command):
            needed.add(f"{kind}:{name}")
            match = PASS_ON.search(command.comment)
            if match:
                needed.add(f"script:{match.group(1)}")
    try:
        result = subprocess.run(
            [sys.executable, __file__, "--dump-parsers", *sorted(needed)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)},
        )
    except BaseException as error:  # noqa: BLE001 - a timeout (ours or pytest-timeout's) is remembered
        return {spec: {"error": f"reading the parsers failed: {error!r}"} for spec in needed}
    if result.returncode != 0:
        return {spec: {"error": f"the child process failed: {result.stderr[-2000:]}"} for spec in needed}
    return json.loads(result.stdout.splitlines()[-1])


# --- checks ----------------------------------------------------------------------------------------------


def skip_reason(command: Command) -> str | None:
    for mark, reason in SKIP_MARKS.items():
        if mark in command.comment:
            return reason
    match = RAN_AT.search(command.comment)
    if match:
        return f"{RAN_AT_REASON} (ran at {match.group(1)})"
    return None


def flags_with_values(args: list[str]) -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg.partition("=")
            out.append((name, [value] if value else []))
        elif out:
            out[-1][1].append(arg)
    return out


def check_paths(args: list[str]) -> list[str]:
    problems = []
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith("--") else arg
        named_file = i > 0 and args[i - 1] in ("--config", "--config_file")
        if (named_file or value.startswith(REPO_DIRS)) and not (REPO / value).exists():
            problems.append(f"{value}: no such file in the repository")
    return problems


def check_flags(args: list[str], options: dict, fallback: dict | None, kind: str) -> list[str]:
    problems = []
    for flag, values in flags_with_values(args):
        if kind == "trl" and flag == "--config":
            continue  # TrlParser reads --config itself
        table = options if flag in options else (fallback or {}).get("options", {})
        if flag not in table:
            where = " (nor by the script named in its 'flags passed on to' mark)" if fallback else ""
            problems.append(f"{flag}: not accepted by the script{where}")
            continue
        choices = table[flag]
        if choices is not None:
            problems += [f"{flag} {value}: not one of {choices}" for value in values if value not in choices]
    return problems


@pytest.mark.parametrize("command", OUR_COMMANDS, ids=[command.id for command in OUR_COMMANDS])
def test_the_command_names_things_that_exist(command: Command):
    reason = skip_reason(command)
    if reason:
        pytest.skip(f"{command.id}: {reason} (marked in the docs): {command.text}")
    kind, name, args = target(command)
    has_flags = any(arg.startswith("--") for arg in args)
    if kind in ("script", "ci"):
        missing = [] if (REPO / name).is_file() else [f"{name}: no such script"]
    else:
        missing = [] if importlib.util.find_spec(name) else [f"python -m {name}: no such module"]
        if not missing and has_flags and name.split(".")[0] not in OUR_PACKAGES:
            missing = [f"python -m {name}: flags of a module outside this repository are not checked"]
    problems = missing + check_paths(args)
    if kind != "ci" and has_flags and not missing:
        parsed = parsers()[f"{kind}:{name}"]
        assert "error" not in parsed, f"{command.id}: cannot read the parser of {name}: {parsed['error']}"
        match = PASS_ON.search(command.comment)
        fallback = parsers()[f"script:{match.group(1)}"] if match else None
        problems += check_flags(args, parsed["options"], fallback, parsed["kind"])
    assert not problems, f"{command.id}: {command.text}\n" + "\n".join(problems)


def test_the_parsers_are_the_scripts_own():
    """The child process really reads each script's parser: known flags are there, a near miss is not."""
    train, evaluate = parsers()["script:train_grpo.py"], parsers()["script:eval.py"]
    learning, server = parsers()["module:benchmarks.learning"], parsers()["module:fleet_rl.server"]
    for parsed in (train, evaluate, learning, server):
        assert "error" not in parsed, parsed["error"]
    assert train["kind"] == evaluate["kind"] == "trl" and learning["kind"] == "argparse"
    assert {"--max_steps", "--learning_rate", "--local_model", "--lora_r", "--episode_mode"} <= set(
        train["options"]
    )
    assert {"--policies", "--base_url", "--num_scenarios"} <= set(evaluate["options"])
    assert {"--seeds", "--render", "--compare", "--work_dir"} <= set(
        learning["options"]
    ) and "--max_steps" not in learning["options"]
    assert "--max-sessions" in server["options"]
    assert check_flags(["--max_step", "4"], train["options"], None, "trl")  # no abbreviations
    assert check_flags(["--max_steps", "4"], learning["options"], None, "argparse")  # not the benchmark's own
    assert not check_flags(["--max_steps", "4"], learning["options"], train, "argparse")  # passed on
    assert not check_flags(["--config", "configs/tiny_cpu.yaml"], train["options"], None, "trl")


def test_the_docs_hold_commands_to_check():
    skipped = [command.id for command in OUR_COMMANDS if skip_reason(command)]
    checked = len(OUR_COMMANDS) - len(skipped)
    others = [command for command in ALL_COMMANDS if not target(command)]
    print(f"{checked} commands checked, {len(skipped)} skipped by their mark, {len(others)} not ours")
    assert checked >= 20
    assert any(command.tokens[:2] == ["bash", ".ci/run"] for command in OUR_COMMANDS)


def test_the_marks_are_what_the_docs_promise():
    for command in OUR_COMMANDS:
        match = PASS_ON.search(command.comment)
        if match:
            assert (REPO / match.group(1)).is_file(), f"{command.id}: {match.group(1)} does not exist"
    unmarked = [
        c.id for c in ALL_COMMANDS if "<" in c.text and ">" in c.text and target(c) and not skip_reason(c)
    ]
    assert not unmarked, f"commands with a <placeholder> but no '# placeholder' mark: {unmarked}"
    # a 'ran at' mark names a commit, in hex, and one this repository has where its whole history is here
    loose = [c.id for c in ALL_COMMANDS if "ran at" in c.comment and not RAN_AT.search(c.comment)]
    assert not loose, f"'ran at' marks without a commit (7 to 40 hex digits): {loose}"
    commits = {RAN_AT.search(c.comment).group(1) for c in ALL_COMMANDS if RAN_AT.search(c.comment)}
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True, text=True
    )
    if commits and shallow.returncode == 0 and shallow.stdout.strip() == "false":
        unknown = [
            commit
            for commit in sorted(commits)
            if subprocess.run(
                ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True
            ).returncode
        ]
        assert not unknown, f"'ran at' marks name commits this repository lacks: {unknown}"


if __name__ == "__main__" and sys.argv[1:2] == ["--dump-parsers"]:
    sys.path.insert(0, str(REPO))
    dumped = _dump_parsers(sys.argv[2:])
    sys.stdout.flush()
    print(json.dumps(dumped))
