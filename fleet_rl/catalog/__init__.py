"""The hardware and model catalog: the data the Agentic Kernel's physics is computed from.

Two tables, each a read-only mapping from a public catalog key (part of the external API, DESIGN.md §4) to a
frozen spec:

- ``GPUS``: memory, memory bandwidth, dense peak throughput per compute precision, power and GPU-to-GPU link
  of twelve accelerators.
- ``MODELS``: the architecture dimensions of seven open models, copied from each model's Hugging Face
  ``config.json``. Parameter counts per module group are *derived* from these dimensions, never typed in.

Every hardware or model figure carries its source in a trailing comment. Print the catalog with
``python3 -m fleet_rl.catalog``.

Units (suffixes on the names): ``_mib`` mebibytes (2**20 B), ``_gb`` gigabytes (1e9 B), ``_gb_s`` GB/s
(1e9 B/s), ``_tflops`` 1e12 FLOP/s, ``_w`` watts, ``_us`` microseconds. Parameter counts are plain integers.

Simplifications, stated openly:

- Peak throughput is the *dense* datasheet figure (no 2:4 sparsity). ``fp32`` is the non-tensor (vector)
  FP32 peak; the 16-bit entries are tensor-core peaks with FP32 accumulation (on GeForce cards this is half
  the FP16-accumulate figure). The ``int8``/``int4`` precisions are weight-only formats that are dequantised
  to 16-bit for the GEMM, so they have no entry of their own and are supported everywhere.
- ``memory_mib`` is the total memory nvidia-smi (rocm-smi for the MI300X) reports in public logs, which is
  less than the marketed size; the CUDA context and allocator overheads are the kernel's business.
- ``idle_w`` is the draw of a powered-up GPU doing no work, read off public nvidia-smi / rocm-smi logs
  (P0 where reported); it varies by ±30% with clocks, temperature and driver, so treat it as an estimate.
- ``interconnect_gb_s`` is the per-GPU, per-direction bandwidth a ring all-reduce can use: half the
  bidirectional NVLink / Infinity Fabric figure, or the PCIe x16 rate per direction. PCIe cards are assumed
  to talk through the PCIe switch or host (no NVLink bridges); GeForce cards have no peer-to-peer, so their
  figure is an upper bound. ``interconnect_latency_us`` is the small-message all-reduce latency. On
  NVSwitch it is 13 µs: NCCL 2.18 under CUDA graphs on H100 SXM measured 11.8-13.8 µs for 1-128 KB bf16
  ("Committed floors (NCCL 2.18.3): 23.1 us eager / 13.7 us CUDA Graph", waynehacking8/nccl-collectives-bench
  results/symmetric/report.md, a 4-GPU slice of an 8×H100 node); A100 and B200 NVSwitch are assumed alike.
  Over PCIe and xGMI it is an order-of-magnitude estimate from nccl-tests ``all_reduce_perf`` runs.
- Model parameter counts cover the weights that are stored: rotary embeddings have none, buffers are
  excluded, MoE layers have no shared experts, sliding windows (Mistral) do not change the count, and GPT-2's
  ``Conv1D`` layers are counted as the linear layers they are.
"""

from fleet_rl.catalog.formats import (
    COMPUTE_PRECISIONS,
    INTERCONNECTS,
    MODULE_GROUPS,
    PRECISIONS,
    WEIGHT_ONLY_PRECISIONS,
)
from fleet_rl.catalog.gpus import GPUS, GPUSpec
from fleet_rl.catalog.models import MODELS, ModelSpec

__all__ = [
    "COMPUTE_PRECISIONS",
    "GPUS",
    "INTERCONNECTS",
    "MODELS",
    "MODULE_GROUPS",
    "PRECISIONS",
    "WEIGHT_ONLY_PRECISIONS",
    "GPUSpec",
    "ModelSpec",
]
