"""Resume from the newest checkpoint that is complete, not merely the highest-numbered folder.

transformers' Trainer (5.23) writes ``checkpoint-N`` in place, file by file, and on
``--resume_from_checkpoint last`` picks the highest-numbered folder, complete or not. A run killed while
saving (preemption, out of memory, Ctrl-C twice) leaves a folder with, say, the adapter and a truncated
``optimizer.pt`` but no ``trainer_state.json``, and the resume ends in a traceback until someone deletes
that folder by hand. Here a checkpoint counts as complete when:

- ``trainer_state.json`` reads as JSON with a ``global_step``;
- its weights are there and whole (``adapter_model.safetensors``, ``model.safetensors`` or a sharded
  index with every shard, or a ``.bin``): a safetensors file's header reads and its size is what the header
  says;
- unless the run saves the model only (``save_only_model``), ``optimizer.pt``, ``scheduler.pt`` and the RNG
  state (``rng_state*.pth``) are there, each a whole ``torch.save`` archive (its zip directory, written
  last, reads: a truncated file has none).

``newest_complete_checkpoint(output_dir)`` returns the newest complete one and the newer damaged ones with
what is wrong with each; ``train_grpo.py`` names the damaged ones on the console and leaves them in place
(never deleted: they may hold what someone wants to look at), and an explicit damaged path is an option
error naming what is missing. Reading the checks costs a few file opens, not a load of the weights.
"""

from __future__ import annotations

import json
import re
import struct
import zipfile
from pathlib import Path

__all__ = ["checkpoint_problem", "newest_complete_checkpoint"]

TRAINER_STATE = "trainer_state.json"
WEIGHT_FILES = ("adapter_model.safetensors", "model.safetensors", "adapter_model.bin", "pytorch_model.bin")
SHARD_INDEX = "model.safetensors.index.json"
TRAINING_STATE_FILES = ("optimizer.pt", "scheduler.pt")
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")


def _safetensors_problem(path: Path) -> str | None:
    try:
        with path.open("rb") as handle:
            (header_size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(header_size))
    except (OSError, struct.error, ValueError) as error:
        return f"{path.name} has no readable header ({type(error).__name__})"
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    expected = 8 + header_size + max(ends, default=0)
    size = path.stat().st_size
    return None if size == expected else f"{path.name} is {size} bytes, its header says {expected}"


def _archive_problem(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path):
            return None
    except (OSError, zipfile.BadZipFile) as error:
        return f"{path.name} is not a whole torch.save archive ({type(error).__name__})"


def _weights_problem(checkpoint: Path) -> str | None:
    index = checkpoint / SHARD_INDEX
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError) as error:
            return f"{SHARD_INDEX} does not read ({type(error).__name__})"
        for shard in shards:
            if not (checkpoint / shard).is_file():
                return f"weight shard {shard} is missing"
            problem = _safetensors_problem(checkpoint / shard)
            if problem:
                return problem
        return None
    for name in WEIGHT_FILES:
        path = checkpoint / name
        if path.is_file():
            return _safetensors_problem(path) if name.endswith(".safetensors") else _archive_problem(path)
    return f"no weights ({' or '.join(WEIGHT_FILES)})"


def checkpoint_problem(checkpoint: str | Path, *, save_only_model: bool = False) -> str | None:
    """What makes ``checkpoint`` incomplete (see the module docstring), or None when it is complete."""
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        return "no such directory"
    try:
        state = json.loads((checkpoint / TRAINER_STATE).read_text())
    except FileNotFoundError:
        return f"{TRAINER_STATE} is missing"
    except (OSError, ValueError) as error:
        return f"{TRAINER_STATE} does not read as JSON ({type(error).__name__})"
    if not isinstance(state, dict) or not isinstance(state.get("global_step"), int):
        return f"{TRAINER_STATE} has no global_step"
    problem = _weights_problem(checkpoint)
    if problem or save_only_model:
        return problem
    for name in TRAINING_STATE_FILES:
        if not (checkpoint / name).is_file():
            return f"{name} is missing"
        problem = _archive_problem(checkpoint / name)
        if problem:
            return problem
    rng_states = sorted(checkpoint.glob("rng_state*.pth"))
    if not rng_states:
        return "the RNG state (rng_state*.pth) is missing"
    for path in rng_states:
        problem = _archive_problem(path)
        if problem:
            return problem
    return None


def newest_complete_checkpoint(
    output_dir: str | Path, *, save_only_model: bool = False
) -> tuple[str | None, list[tuple[str, str]]]:
    """(the newest complete ``checkpoint-N`` in ``output_dir`` or None, [(each newer damaged one, what is
    wrong with it)])."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return None, []
    numbered = []
    for path in output_dir.iterdir():
        match = CHECKPOINT_NAME.match(path.name)
        if match and path.is_dir():
            numbered.append((int(match.group(1)), path))
    damaged: list[tuple[str, str]] = []
    for _, path in sorted(numbered, reverse=True):
        problem = checkpoint_problem(path, save_only_model=save_only_model)
        if problem is None:
            return str(path), damaged
        damaged.append((str(path), problem))
    return None, damaged
