"""Build a directory once, atomically, safely from several processes: the local models' install step.

``build_directory(target, write, is_complete=...)`` holds an exclusive lock file beside ``target``, lets
``write`` fill a temporary sibling directory and renames it to ``target`` only when ``write`` has returned.
So a reader either finds no directory or a finished one, never half of one: a build killed at any point
leaves at most a hidden ``.<name>.tmp-*`` sibling, which the next build (holding the lock, so no other
build can own it) deletes. Several processes (``accelerate launch``) may call it at once: the first builds,
the others wait on the lock and then find ``target`` complete.

Used by ``fleet_rl.tiny_model`` (the tiny random Llama) and ``fleet_rl.smollm2`` (SmolLM2 converted from
its GGUF). Each decides what "complete" means (``is_complete``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["build_directory", "build_lock", "remove_tree"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``.<name>.lock`` beside ``target`` (released when the process dies)."""
    lock_path = target.parent / f".{target.name}.lock"
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def remove_tree(path: Path) -> None:
    """Delete ``path`` by first renaming it aside, so the name is free at once even if deletion is slow."""
    trash = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.old-"))
    os.replace(path, trash / path.name)
    shutil.rmtree(trash)


def _remove_leftovers(target: Path) -> None:
    """Delete temporary siblings of ``target`` that a killed build left behind. Call with the lock held."""
    for pattern in (f".{target.name}.tmp-*", f".{target.name}.old-*"):
        for leftover in target.parent.glob(pattern):
            if leftover.is_dir():
                logger.info("removing %s, left by an interrupted build", leftover)
                shutil.rmtree(leftover, ignore_errors=True)


def build_directory(
    target: str | os.PathLike,
    write: Callable[[Path], None],
    *,
    is_complete: Callable[[Path], bool],
    replace: bool = False,
    what: str = "a model",
) -> bool:
    """Build ``target`` with ``write(temporary_dir)`` under the lock; return whether this call built it.

    Without ``replace``, a ``target`` that ``is_complete`` is left as it is (no build). With ``replace``, a
    complete ``target`` is rebuilt and swapped in. An empty directory at ``target`` is filled; a file, or a
    non-empty directory that is not complete, raises ``FileExistsError`` and is left untouched (it may be
    someone's data). Whatever ``write`` raises propagates, after its temporary directory is deleted."""
    target = Path(target).absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    with build_lock(target):
        if not replace and is_complete(target):  # another process built it while we waited
            return False
        if target.exists() and not target.is_dir():
            raise FileExistsError(f"{target} exists and is not a directory")
        if target.is_dir() and any(target.iterdir()) and not is_complete(target):
            raise FileExistsError(f"{target} is a non-empty directory without {what}; not overwriting it")
        _remove_leftovers(target)
        building = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
        building.chmod(0o755)  # mkdtemp makes it private (0o700); the result is an ordinary directory
        try:
            write(building)
            if target.exists() and is_complete(target):
                remove_tree(target)  # only reached with replace=True
            os.replace(building, target)  # atomic; replaces an empty directory
        finally:
            if building.exists():
                shutil.rmtree(building)
    return True
