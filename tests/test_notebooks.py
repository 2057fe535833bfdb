"""The notebooks in notebooks/: valid nbformat 4 without outputs, commands that match the repository, the
CPU quickstart's pure-Python cells run (fast: no training, no model, no TRL import), and the whole CPU
quickstart, shell cells included, executed in a Jupyter kernel (nbclient; marked slow).

The structure is checked by hand against the nbformat 4 schema's required keys. In the fast tests shell
lines (``!``) and magics (``%``) are not executed; their scripts, configs, constraints files, extras and
``--flags`` are checked against the repository (flags against the fields of the dataclasses each script
parses, read with ``ast`` so that TRL is not imported).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = {
    "quickstart_cpu": REPO / "notebooks" / "quickstart_cpu.ipynb",
    "train_grpo_colab": REPO / "notebooks" / "train_grpo_colab.ipynb",
}
CELL_KEYS = {
    "markdown": {"cell_type", "id", "metadata", "source", "attachments"},
    "raw": {"cell_type", "id", "metadata", "source", "attachments"},
    "code": {"cell_type", "id", "metadata", "source", "outputs", "execution_count"},
}
SHELL_LINE = re.compile(r"^\s*[!%]", re.MULTILINE)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _code_cells(notebook: dict) -> list[str]:
    return [_source(cell) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def _code_lines(name: str) -> list[str]:
    """Every line of every code cell, commented-out commands included (they must be right too)."""
    return [line for source in _code_cells(_load(NOTEBOOKS[name])) for line in source.splitlines()]


def _class_fields(path: Path, class_names: set[str] | None = None) -> set[str]:
    """Annotated field names of the classes in a Python file (all classes, or those named)."""
    fields = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and (class_names is None or node.name in class_names):
            fields |= {
                item.target.id
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    return fields


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates the package without importing it
    assert spec is not None and spec.origin is not None, f"{name} is not installed"
    return Path(spec.origin).parent


def _script_fields() -> dict[str, set[str]]:
    """Options each script accepts: its dataclasses' fields, plus TrlParser's --config."""
    trl, transformers = _package_dir("trl"), _package_dir("transformers")
    train = (
        _class_fields(REPO / "fleet_rl" / "training" / "arguments.py", {"FleetScriptArguments"})
        | _class_fields(trl / "trainer" / "grpo_config.py")
        | _class_fields(trl / "trainer" / "base_config.py")
        | _class_fields(trl / "trainer" / "model_config.py")
        | _class_fields(transformers / "training_args.py", {"TrainingArguments"})
    )
    evaluation = _class_fields(REPO / "eval.py", {"EvalArguments"})
    return {"train_grpo.py": train | {"config"}, "eval.py": evaluation | {"config"}}


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_is_valid_nbformat4_without_outputs(name):
    path = NOTEBOOKS[name]
    assert path.stat().st_size < 64_000, "keep notebooks small"
    notebook = _load(path)
    assert notebook["nbformat"] == 4 and isinstance(notebook["nbformat_minor"], int)
    assert isinstance(notebook["metadata"], dict) and "widgets" not in notebook["metadata"]
    assert notebook["cells"], "no cells"
    ids = []
    for cell in notebook["cells"]:
        assert cell["cell_type"] in CELL_KEYS, cell["cell_type"]
        assert set(cell) <= CELL_KEYS[cell["cell_type"]], set(cell) - CELL_KEYS[cell["cell_type"]]
        assert isinstance(cell["metadata"], dict)
        source = cell["source"]
        assert isinstance(source, str) or all(isinstance(line, str) for line in source)
        assert _source(cell).strip(), "empty cell"
        if notebook["nbformat_minor"] >= 5:
            assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", cell["id"]), cell.get("id")
            ids.append(cell["id"])
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [], "stored outputs"
            assert cell["execution_count"] is None, "stored execution count"
    assert len(ids) == len(set(ids)), "duplicate cell ids"
    # Code cells are Python once IPython's shell lines and magics are set aside.
    for source in _code_cells(notebook):
        compile(SHELL_LINE.sub(lambda match: match.group(0)[:-1] + "pass #", source), name, "exec")


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_scripts_configs_and_install_targets_exist(name):
    text = "\n".join(_code_lines(name))
    scripts = re.findall(r"\bpython\s+(?!-)(\S+\.py)\b", text)
    configs = re.findall(r"--config(?:_file)?[ =]+['\"]?([^\s'\"]+)", text)
    constraints = re.findall(r"\s-c\s+['\"]?(constraints/[^\s'\"]+)", text)
    extras = re.findall(r"-e\s+['\"]?\.\[([^\]]+)\]", text)
    assert scripts and configs, "the notebook runs no script with a config"
    for relative in scripts + configs + constraints:
        assert (REPO / relative).is_file(), f"{name} mentions {relative}, which does not exist"
    defined = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ",".join(extras).split(",") if extras else []:
        assert extra.strip() in defined, f"{name} installs the extra [{extra}], not in pyproject.toml"


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_command_line_flags_are_fields_of_the_scripts_arguments(name):
    fields = _script_fields()
    everything = set().union(*fields.values())
    for line in _code_lines(name):
        if "git " in line:
            continue  # git's own options
        flags = re.findall(r"(?<![\w-])--(\w+)", line)
        script = next((s for s in fields if re.search(rf"\bpython\s+{re.escape(s)}", line)), None)
        allowed = fields[script] if script else everything
        unknown = [flag for flag in flags if flag not in allowed]
        assert not unknown, f"{name}: {unknown} not accepted by {script or 'train_grpo.py/eval.py'}: {line}"


def test_cpu_quickstart_python_cells_run(monkeypatch, capsys):
    """The quickstart's cells without shell lines or magics run in order in a fresh namespace."""
    monkeypatch.chdir(REPO)
    namespace: dict = {"__name__": "__main__"}
    executed = 0
    for index, source in enumerate(_code_cells(_load(NOTEBOOKS["quickstart_cpu"]))):
        if SHELL_LINE.search(source) or re.search(r"python\s+(train_grpo|eval)\.py", source):
            continue  # shell cells: training and evaluation runs
        exec(compile(source, f"quickstart_cpu.ipynb cell {index}", "exec"), namespace)
        executed += 1
    assert executed >= 6, "the quickstart should keep its pure-Python walk-through"
    output = capsys.readouterr().out
    assert "sql-adapter" in output and "oom" in output and "several_plans" in output


@pytest.mark.slow
@pytest.mark.timeout(1200)  # trains the tiny preset: ~2-4 minutes on 2 idle cores
def test_cpu_quickstart_executes_headless(tmp_path, monkeypatch):
    """The whole CPU quickstart in a Jupyter kernel (nbclient), shell cells included: baselines, the tiny
    preset's training and its held-out report. It runs in a scratch directory that holds the scripts and
    configs, so its outputs/ and models/ do not touch the repository's."""
    import nbformat
    from nbclient import NotebookClient

    for name in ("train_grpo.py", "eval.py", "configs"):
        (tmp_path / name).symlink_to(REPO / name)
    bin_dir = str(Path(sys.executable).parent)  # `!python` in a cell: this environment's interpreter
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    for key, value in {"WANDB_MODE": "offline", "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "2"}.items():
        monkeypatch.setenv(key, value)
    notebook = nbformat.read(NOTEBOOKS["quickstart_cpu"], as_version=4)
    client = NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, if a cell fails
    outputs = "\n".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    assert (tmp_path / "outputs" / "tiny_cpu" / "eval_report.json").exists()
    assert (tmp_path / "outputs" / "baselines" / "even_bf16_tiny.json").exists()
    assert "even_bf16 baseline" in outputs and "does not exist yet" not in outputs
