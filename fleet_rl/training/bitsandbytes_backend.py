"""Does bitsandbytes' 4-bit quantisation work on this machine? Asked before any model loads.

``load_in_4bit`` loads the base through bitsandbytes (NF4). Where bitsandbytes has no working backend for
the device (a build without the CPU or CUDA kernels, a broken install), the first sign would otherwise be a
traceback deep inside model loading, minutes in. ``bitsandbytes_4bit_error(device)`` quantises and
dequantises one block of 64 values on ``device`` (microseconds) and returns why that failed, or None.
"""

from __future__ import annotations

__all__ = ["bitsandbytes_4bit_error"]


def bitsandbytes_4bit_error(device: str) -> str | None:
    """None when NF4 quantisation round-trips on ``device`` ("cpu" or "cuda"); else what went wrong."""
    try:
        import bitsandbytes.functional as bnb_functional
        import torch
    except Exception as error:  # an import that fails for any reason means no backend: say which
        return f"bitsandbytes cannot be imported ({type(error).__name__}: {error})"
    try:
        block = torch.linspace(-1.0, 1.0, 64, device=device)
        packed, state = bnb_functional.quantize_4bit(block, quant_type="nf4")
        restored = bnb_functional.dequantize_4bit(packed, state, quant_type="nf4")
    except Exception as error:  # bitsandbytes raises many kinds (RuntimeError, NotImplementedError, ...)
        return f"bitsandbytes has no working 4-bit backend on {device} ({type(error).__name__}: {error})"
    # NF4's 16 levels on [-1, 1] are at most ~0.28 apart: a working kernel comes back within half of that
    error = (restored.reshape(-1).float() - block).abs().max() if restored.numel() == block.numel() else None
    if error is None or not bool(torch.isfinite(error)) or float(error) > 0.2:
        return f"bitsandbytes' 4-bit round trip on {device} gave wrong values"
    return None
