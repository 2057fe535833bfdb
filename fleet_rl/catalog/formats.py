"""Names every plan and catalog entry uses: numeric formats, module groups, interconnects.

The index of a precision in ``PRECISIONS`` is its integer code in the batched kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

# Numeric formats a plan may name; the index of a precision is its integer code in batched kernels.
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
# Module groups a plan assigns precisions to (DESIGN.md §3).
MODULE_GROUPS: tuple[str, ...] = ("embedding", "attention", "mlp", "norm", "lm_head")

# Precisions that are GEMM compute formats with a peak of their own; the rest are weight-only storage formats.
COMPUTE_PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8")
WEIGHT_ONLY_PRECISIONS: tuple[str, ...] = ("int8", "int4")
INTERCONNECTS: tuple[str, ...] = ("nvlink", "pcie", "infinity-fabric")


def read_only_index(specs: tuple) -> Mapping:
    """name -> spec, read-only; refuses duplicate names."""
    table = {spec.name: spec for spec in specs}
    if len(table) != len(specs):
        raise ValueError("duplicate catalog names")
    return MappingProxyType(table)
