"""A resumed QLoRA run trains its adapters in the dtype a fresh run does: bf16.

On a 4-bit or 8-bit base, TRL's ``GRPOTrainer`` casts the trainable LoRA weights to bf16 when it builds the
PEFT model (the QLoRA paper's recipe). Resuming goes through transformers' ``_load_from_checkpoint``, which
calls PEFT's ``load_adapter``; that upcasts bf16 adapter weights to fp32 (``autocast_adapter_dtype=True``, its
default). So before this, a resumed run trained fp32 adapters where the run it resumed trained bf16 ones:
``benchmarks/kill_resume.py`` saw rewards identical up to the first resume and gradient norms that differed
from the next step on (a fresh process's rounded to bf16, e.g. 0.390625; a resumed one's not).
``FleetGRPOTrainer._load_from_checkpoint`` casts them back after loading, as TRL cast them at the start,
before the optimizer (and its restored state) is built.
"""

from __future__ import annotations

import torch

__all__ = ["is_quantized", "trainable_to_bf16"]


def is_quantized(model) -> bool:
    """True for a model loaded in 4 or 8 bits (through a PEFT wrapper too), as TRL tests it."""
    return bool(getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_loaded_in_8bit", False))


def trainable_to_bf16(model) -> list[str]:
    """Cast the trainable weights to bf16 as TRL does for QLoRA (a DoRA magnitude vector stays: its updates
    can be smaller than bf16 resolves); the names of those that were cast."""
    cast = []
    for name, parameter in model.named_parameters():
        if (
            parameter.requires_grad
            and "lora_magnitude_vector" not in name
            and parameter.dtype != torch.bfloat16
        ):
            parameter.data = parameter.data.to(torch.bfloat16)
            cast.append(name)
    return cast
