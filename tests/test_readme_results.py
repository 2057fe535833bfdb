"""The README's results and the docs' paths are what the repository holds.

- The results table of README.md is ``python -m benchmarks.learning --render`` of the committed result,
  line for line, and the learning results that docs/learning-benchmark.md (today's) and
  docs/experiment-log.md (the rendered history) show are their files' whole ``--render`` output;
  docs/kernel.md's calibration table is what ``python -m benchmarks.kernel.calibration --markdown`` prints.
- Every relative link of README.md, CHANGELOG.md and docs/*.md leads to a file or directory of the
  repository, and every repository path they mention (``fleet_rl/...``, ``configs/...``, ``tests/...``,
  ``train_grpo.py``...) exists. Output locations (``outputs/``, ``runs/``, ``reports/``) are not repository
  paths and are not checked, nor is a path at a past commit, written as ``git show`` takes it
  (``2a054bb:benchmarks/repair_ceiling.py``: a retired file, at the last commit that had it).
"""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md"))]
RESULT = "benchmarks/results/learning_smollm2_cpu.json"
# The results each page shows as their whole --render output.
RENDERED = {
    "docs/learning-benchmark.md": [RESULT],
    "docs/experiment-log.md": [
        "benchmarks/results/history/learning_smollm2_cpu_heuristic_batching_beta0.1.json",
        "benchmarks/results/history/learning_smollm2_cpu_sized_optimal.json",
        "benchmarks/results/history/learning_smollm2_cpu_sized_sil0.3.json",
        "benchmarks/results/history/learning_smollm2_cpu_sized_sil0.1.json",
        "benchmarks/results/history/learning_smollm2_cpu_compact.json",
        "benchmarks/results/history/learning_smollm2_cpu_scalenone.json",
        "benchmarks/results/history/learning_smollm2_cpu_t05.json",
        "benchmarks/results/history/learning_smollm2_cpu_rf.json",
        "benchmarks/results/history/learning_smollm2_cpu.json",
        "benchmarks/results/history/learning_smollm2_cpu_nf4.json",
    ],
}
# Pages written on another branch, linked from here before they are merged: reported as a skip while
# missing. Empty this once they are on the branch.
ARRIVING: set[str] = set()  # paths another branch writes, skipped (with a reason) until merged
ROOT_FILES = ("train_grpo.py", "eval.py", "openenv.yaml", "pyproject.toml", "CHANGELOG.md", "README.md")
REPO_PATH = re.compile(
    r"(?<![\w./-])(?:fleet_rl|rewards|benchmarks|configs|tests|docs|examples|notebooks|constraints|\.ci)"
    r"/[\w./-]*|(?<![\w./-])(?:" + "|".join(re.escape(name) for name in ROOT_FILES) + r")(?![\w-])"
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
AT_A_COMMIT = re.compile(r"(?<![\w./-])[0-9a-f]{7,40}:$")  # what precedes a path at a past commit


def printed_lines(*command: str) -> list[str]:
    """The non-blank lines a repository script prints, stripped."""
    out = subprocess.run(
        [sys.executable, *command], cwd=REPO, capture_output=True, text=True, timeout=300, check=True
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


@cache
def render(result: str) -> list[str]:
    return printed_lines("-m", "benchmarks.learning", "--render", result)


def table_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("|")]


def markdown_tables(text: str) -> list[list[str]]:
    tables, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.strip().startswith("|"):
            current.append(line.strip())
        elif current:
            tables.append(current)
            current = []
    return tables


def test_the_readme_results_table_is_the_rendered_result():
    tables = [t for t in markdown_tables((REPO / "README.md").read_text()) if "mean % of optimum" in t[0]]
    assert len(tables) == 1, "README.md has one results table"
    assert tables[0] == table_lines(render(RESULT))


@pytest.mark.parametrize("page", sorted(RENDERED))
def test_the_docs_show_the_rendered_results(page):
    text = "\n".join(line.strip() for line in (REPO / page).read_text().splitlines() if line.strip())
    for result in RENDERED[page]:
        assert "\n".join(render(result)) in text, f"{page} does not show --render {result} as it prints"


def mentioned_paths(page: Path) -> set[str]:
    """Repository paths a page names, except in the recorded commands of rendered results ("Command: `...`",
    which keep the paths of their day: an earlier result's --output was moved to history/ since)."""
    text = "\n".join(
        line for line in page.read_text().splitlines() if not line.strip().startswith("Command: `")
    )
    paths = set()
    for match in REPO_PATH.finditer(text):
        path, after = match.group(0).rstrip("."), text[match.end() : match.end() + 1]
        if after in "<*{":  # a placeholder or a glob: benchmarks/results/learning_<preset>.json
            continue
        if AT_A_COMMIT.search(text[max(0, match.start() - 41) : match.start()]):
            continue  # 2a054bb:benchmarks/repair_ceiling.py, a file of that commit
        paths.add(path)
    return paths


def linked_paths(page: Path) -> set[str]:
    links = set()
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        resolved = (page.parent / target.split("#")[0]).resolve()
        links.add(resolved.relative_to(REPO).as_posix())
    return links


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(REPO).as_posix() for page in PAGES])
def test_the_links_and_paths_exist(page):
    wanted = mentioned_paths(page) | linked_paths(page)
    missing = sorted(path for path in wanted if not (REPO / path).exists())
    arriving = [path for path in missing if path in ARRIVING]
    assert missing == arriving, (
        f"{page.name} names paths that do not exist: {sorted(set(missing) - ARRIVING)}"
    )
    if arriving:
        pytest.skip(f"{page.name} links {', '.join(arriving)}, written on another branch (not merged yet)")


def test_the_docs_pages_are_there():
    names = {page.name for page in (REPO / "docs").glob("*.md")}
    expected = {"training.md", "learning-benchmark.md", "rewards.md", "kernel.md", "server.md"}
    expected |= {"evaluation.md", "benchmarks.md", "dependencies.md"}
    assert expected <= names
    for name in expected:
        first = (REPO / "docs" / name).read_text().split("\n\n")[1]
        assert first.startswith("With this page you can"), f"docs/{name} starts with what a reader can do"


def test_the_calibration_table_is_what_the_benchmark_prints():
    """docs/kernel.md's calibration table is `python -m benchmarks.kernel.calibration --markdown`."""
    printed = "\n".join(printed_lines("-m", "benchmarks.kernel.calibration", "--markdown"))
    text = "\n".join(
        line.strip() for line in (REPO / "docs/kernel.md").read_text().splitlines() if line.strip()
    )
    assert printed in text
