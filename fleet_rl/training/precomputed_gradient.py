"""A sum of losses whose parts are differentiated one at a time, so only one part's activations are held.

Self-imitation adds the NLL of two stored answers (~1,100 SmolLM2 tokens each) to the first micro-batch's
GRPO loss; as one padded batch, both answers' activations would stay alive until the trainer's backward
pass. ``sum_one_at_a_time`` runs each part's forward and backward pass at once (``torch.autograd.grad``),
keeps only its gradient (~20 MB for LoRA r16 on SmolLM2-135M), and returns the parts' summed value as a
tensor whose backward pass hands those gradients on, scaled by whatever the trainer multiplies the loss by.
The gradient is the sum's, up to float rounding; no forward pass runs twice.

The parts must not need the trainer's own backward pass: a model wrapped for several processes (DDP,
FSDP, DeepSpeed) reduces gradients in hooks that ``torch.autograd.grad`` does not fire, and reentrant
gradient checkpointing refuses it, so callers keep one batch there (``self_imitation.imitation_nll``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

__all__ = ["sum_one_at_a_time"]


class _PrecomputedGradient(torch.autograd.Function):
    """Returns ``value``; its backward pass gives each of ``parameters`` its stored gradient times the
    incoming one."""

    @staticmethod
    def forward(ctx, value, gradients, *parameters):
        ctx.gradients = gradients
        return value.clone()

    @staticmethod
    def backward(ctx, grad_output):
        scaled = tuple(None if g is None else g * grad_output for g in ctx.gradients)
        return (None, None, *scaled)


def sum_one_at_a_time(parts: Sequence[Callable[[], torch.Tensor]], parameters: Sequence[torch.Tensor]):
    """``sum(part() for part in parts)`` as a scalar tensor whose gradient with respect to ``parameters`` is
    the sum's, with each part's activations freed before the next part runs (module docstring).

    Under ``torch.no_grad()`` (or with no parameter requiring a gradient) it is the plain sum, no gradient
    kept. Each part returns a scalar tensor computed from ``parameters``."""
    trainable = [p for p in parameters if p.requires_grad]
    if not parts:
        return torch.zeros(())
    if not torch.is_grad_enabled() or not trainable:
        with torch.no_grad():
            return torch.stack([part().reshape(()) for part in parts]).sum()
    total = torch.zeros((), device=trainable[0].device)
    gradients: list[torch.Tensor | None] = [None] * len(trainable)
    for part in parts:
        value = part()
        part_gradients = torch.autograd.grad(value, trainable, allow_unused=True)
        for i, gradient in enumerate(part_gradients):
            if gradient is not None:
                gradients[i] = gradient if gradients[i] is None else gradients[i] + gradient
        total = total + value.detach().to(total.device)
    return _PrecomputedGradient.apply(total, tuple(gradients), *trainable)
