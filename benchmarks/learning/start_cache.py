"""Learning benchmark, the start's evaluation kept across processes and runs.

The start policy of a preset without a warm start is the same model for every seed, and its greedy
evaluation is deterministic: two seeds run as two processes (``--seeds 0`` and ``--seeds 1``) would each spend
the same ~19 minutes on it. So an evaluation is stored as ``<work_dir>/start-evaluations/<key digest>.json``
and reused only when its whole key matches: the sha256 of the start model's files (weights, config,
tokenizer), the evaluation settings, the scenario fingerprint, how the model is loaded (4-bit or not, dtype)
and the torch and transformers versions. A start that differs per seed (a warm start trained with the
seed) has other weights, hence another key.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = [
    "MODEL_FILES",
    "START_EVALUATIONS",
    "cached_evaluation",
    "model_files_sha256",
    "start_evaluation_key",
]

START_EVALUATIONS = "start-evaluations"  # the directory under --work_dir
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.gguf")
CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer*", "special_tokens_map.json")
MODEL_FILES = (*WEIGHT_FILES, *CONFIG_FILES, "chat_template.jinja")
LOADING_OPTIONS = ("dtype", "load_in_4bit", "load_in_8bit", "bnb_4bit_quant_type", "use_bnb_nested_quant")


def model_files_sha256(model_dir: str | Path) -> str | None:
    """One sha256 over the names and contents of the model's files (``MODEL_FILES`` in ``model_dir``), or
    None if it is not a local directory holding weights (a hub name: nothing to hash)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return None
    paths = sorted({path for pattern in MODEL_FILES for path in model_dir.glob(pattern) if path.is_file()})
    if not any(path.match(pattern) for path in paths for pattern in WEIGHT_FILES):
        return None
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            digest.update(f"{path.name}\0{hashlib.file_digest(handle, 'sha256').hexdigest()}\n".encode())
    return digest.hexdigest()


def _version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def start_evaluation_key(
    start_model: str, settings: dict, scenario_fingerprint: str, model_args
) -> dict | None:
    """What the start's evaluation depends on, as a JSON-able dict; None when the start cannot be hashed."""
    files_sha256 = model_files_sha256(start_model)
    if files_sha256 is None:
        return None
    return {
        "start_model_files_sha256": files_sha256,
        "settings": settings,
        "scenario_fingerprint": scenario_fingerprint,
        "loading": {option: str(getattr(model_args, option, None)) for option in LOADING_OPTIONS},
        "versions": {name: _version(name) for name in ("torch", "transformers")},
    }


def cached_evaluation(
    directory: Path, key: dict | None, evaluate: Callable[[], dict]
) -> tuple[dict, str | None]:
    """(the evaluation, the file it was reused from or None): the stored one if ``directory`` holds one under
    exactly this ``key``, else ``evaluate()``, then stored (written whole, then renamed into place)."""
    if key is None:
        return evaluate(), None
    encoded = json.dumps(key, sort_keys=True).encode()
    path = Path(directory) / f"{hashlib.sha256(encoded).hexdigest()[:16]}.json"
    if path.is_file():
        try:
            stored = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            stored = {}
        if stored.get("key") == key and "evaluation" in stored:
            return stored["evaluation"], str(path)
    evaluation = evaluate()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps({"key": key, "evaluation": evaluation}, indent=1))
    os.replace(partial, path)
    return evaluation, None
