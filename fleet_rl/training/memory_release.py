"""Give the memory a CPU run has freed back to the system (glibc's ``malloc_trim``): at each step's end, after
training, and after each held-out evaluation.

Why: glibc's ``malloc`` maps an allocation of at least ``M_MMAP_THRESHOLD`` bytes on its own and unmaps it on
free, but each such free raises the threshold to the freed block's size (up to 32 MiB on 64-bit). Once a
run has freed its first large tensors, the tensors of a GRPO step (logits, activations, the generation's
KV cache: most under 32 MiB) come from the heap, and glibc keeps the heap's freed pages. A process's
resident memory then rises to the sum of its phases' high-water marks and stays there, memory a second
process on the machine cannot have. ``malloc_trim(0)`` returns every whole free page of every arena to the
kernel (glibc >= 2.8) in milliseconds, moving no live memory (figures: docs/training.md "Memory").

Linux with glibc only: elsewhere (macOS, musl) ``release_freed_memory`` returns False and does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

from transformers import TrainerCallback

__all__ = ["ReleaseFreedMemory", "release_freed_memory"]


@functools.cache
def _malloc_trim():
    """glibc's ``int malloc_trim(size_t pad)``, or None where the C library has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_freed_memory() -> bool:
    """Return this process's freed heap pages to the kernel; True where glibc released some."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False


class ReleaseFreedMemory(TrainerCallback):
    """``release_freed_memory`` at each step's end and after each evaluation."""

    def on_step_end(self, args, state, control, **kwargs):
        release_freed_memory()

    def on_evaluate(self, args, state, control, **kwargs):
        release_freed_memory()
