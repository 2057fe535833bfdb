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
  figure is an upper bound. ``interconnect_latency_us`` is an order-of-magnitude estimate of the
  small-message all-reduce latency seen in nccl-tests ``all_reduce_perf`` runs, not a measurement.
- Model parameter counts cover the weights that are stored: rotary embeddings have none, buffers are
  excluded, MoE layers have no shared experts, sliding windows (Mistral) do not change the count, and GPT-2's
  ``Conv1D`` layers are counted as the linear layers they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

# Numeric formats a plan may name; the index of a precision is its integer code in batched kernels.
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
# Module groups a plan assigns precisions to (DESIGN.md §3).
MODULE_GROUPS: tuple[str, ...] = ("embedding", "attention", "mlp", "norm", "lm_head")

# Precisions that are GEMM compute formats with a peak of their own; the rest are weight-only storage formats.
COMPUTE_PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp8")
WEIGHT_ONLY_PRECISIONS: tuple[str, ...] = ("int8", "int4")
INTERCONNECTS: tuple[str, ...] = ("nvlink", "pcie", "infinity-fabric")


# --------------------------------------------------------------------------------------------------------
# GPUs
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GPUSpec:
    """One accelerator model. Immutable and hashable; ``dense_tflops`` is a read-only mapping."""

    name: str  # catalog key
    memory_mib: int  # usable memory as nvidia-smi reports it
    memory_bandwidth_gb_s: float  # HBM/GDDR peak bandwidth
    dense_tflops: Mapping[str, float] = field(hash=False)  # compute precision -> dense peak; missing = none
    tdp_w: float  # board power limit
    idle_w: float  # powered-up draw with no work (estimate, see module docstring)
    interconnect: str  # one of INTERCONNECTS
    interconnect_gb_s: float  # per GPU, per direction, usable by ring all-reduce
    interconnect_latency_us: float  # small-message all-reduce latency (estimate)

    def __post_init__(self) -> None:
        # Copy into a private dict and freeze it, so neither the caller nor anyone else can mutate it.
        object.__setattr__(self, "dense_tflops", MappingProxyType(dict(self.dense_tflops)))
        unknown = set(self.dense_tflops) - set(COMPUTE_PRECISIONS)
        if unknown:
            raise ValueError(f"{self.name}: dense_tflops has non-compute precisions {sorted(unknown)}")
        if "fp32" not in self.dense_tflops:
            raise ValueError(f"{self.name}: every GPU needs an fp32 peak")
        if any(value <= 0 for value in self.dense_tflops.values()):
            raise ValueError(f"{self.name}: dense_tflops must be positive")
        if self.interconnect not in INTERCONNECTS:
            raise ValueError(f"{self.name}: interconnect must be one of {INTERCONNECTS}")
        positive = {
            "memory_mib": self.memory_mib,
            "memory_bandwidth_gb_s": self.memory_bandwidth_gb_s,
            "tdp_w": self.tdp_w,
            "idle_w": self.idle_w,
            "interconnect_gb_s": self.interconnect_gb_s,
            "interconnect_latency_us": self.interconnect_latency_us,
        }
        for key, value in positive.items():
            if not value > 0:
                raise ValueError(f"{self.name}: {key} must be positive, got {value}")
        if not self.idle_w < self.tdp_w:
            raise ValueError(f"{self.name}: idle_w ({self.idle_w}) must be below tdp_w ({self.tdp_w})")

    @property
    def memory_gb(self) -> float:
        """Usable memory in GB (1e9 bytes)."""
        return self.memory_mib * 2**20 / 1e9

    def supports(self, precision: str) -> bool:
        """Whether a plan may use ``precision`` on this GPU.

        Weight-only ``int8``/``int4`` are dequantised to 16-bit compute, so they run everywhere; a compute
        precision needs native support (a ``dense_tflops`` entry). Names outside ``PRECISIONS`` are False.
        """
        if precision in WEIGHT_ONLY_PRECISIONS:
            return True
        return precision in self.dense_tflops


def _index(specs: tuple) -> Mapping:
    """name -> spec, read-only; refuses duplicate names."""
    table = {spec.name: spec for spec in specs}
    if len(table) != len(specs):
        raise ValueError("duplicate catalog names")
    return MappingProxyType(table)


GPUS: Mapping[str, GPUSpec] = _index(
    (
        GPUSpec(
            name="h100-sxm",
            memory_mib=81559,  # nvidia-smi "NVIDIA H100 80GB HBM3": 81559MiB total
            memory_bandwidth_gb_s=3350.0,  # NVIDIA H100 datasheet (SXM5): 3.35 TB/s
            dense_tflops={
                "fp32": 67.0,  # NVIDIA H100 datasheet (SXM5): FP32 67 TFLOPS
                "bf16": 989.4,  # H100 datasheet: BF16 1,979 with sparsity -> 989.4 dense
                "fp16": 989.4,  # H100 datasheet: FP16 1,979 with sparsity -> 989.4 dense
                "fp8": 1978.9,  # H100 datasheet: FP8 3,958 with sparsity -> 1,978.9 dense
            },
            tdp_w=700.0,  # H100 datasheet (SXM5): up to 700 W
            idle_w=70.0,  # nvidia-smi idle logs of H100 SXM: 68-72 W in P0
            interconnect="nvlink",  # NVLink 4 via NVSwitch (HGX H100)
            interconnect_gb_s=450.0,  # H100 datasheet: NVLink 900 GB/s bidirectional -> 450 per direction
            interconnect_latency_us=6.0,  # estimate, nccl-tests all_reduce_perf small messages on NVSwitch
        ),
        GPUSpec(
            name="h100-pcie",
            memory_mib=81559,  # nvidia-smi "NVIDIA H100 PCIe": 81559MiB total
            memory_bandwidth_gb_s=2000.0,  # NVIDIA H100 PCIe product brief PB-11133-001: 2,000 GB/s (HBM2e)
            dense_tflops={
                "fp32": 51.0,  # NVIDIA H100 datasheet (PCIe): FP32 51 TFLOPS
                "bf16": 756.5,  # H100 datasheet (PCIe): BF16 1,513 with sparsity -> 756.5 dense
                "fp16": 756.5,  # H100 datasheet (PCIe): FP16 1,513 with sparsity -> 756.5 dense
                "fp8": 1513.0,  # H100 datasheet (PCIe): FP8 3,026 with sparsity -> 1,513 dense
            },
            tdp_w=350.0,  # H100 PCIe product brief PB-11133-001: max TDP 350 W
            idle_w=50.0,  # nvidia-smi idle logs of H100 PCIe: 51-53 W in P0
            interconnect="pcie",  # PCIe Gen5 x16 (no NVLink bridge assumed)
            interconnect_gb_s=64.0,  # PCIe Gen5 x16: 128 GB/s bidirectional -> 64 per direction
            interconnect_latency_us=15.0,  # estimate, nccl-tests all_reduce_perf small messages over PCIe
        ),
        GPUSpec(
            name="h200",
            memory_mib=143771,  # nvidia-smi "NVIDIA H200": 143771MiB total
            memory_bandwidth_gb_s=4800.0,  # NVIDIA H200 datasheet (SXM): 4.8 TB/s
            dense_tflops={
                "fp32": 67.0,  # NVIDIA H200 datasheet (SXM): FP32 67 TFLOPS (same GH100 as H100 SXM)
                "bf16": 989.4,  # H200 datasheet: BF16 1,979 with sparsity -> 989.4 dense
                "fp16": 989.4,  # H200 datasheet: FP16 1,979 with sparsity -> 989.4 dense
                "fp8": 1978.9,  # H200 datasheet: FP8 3,958 with sparsity -> 1,978.9 dense
            },
            tdp_w=700.0,  # H200 datasheet (SXM): up to 700 W; nvidia-smi power cap 700 W
            idle_w=75.0,  # nvidia-smi idle logs of H200: 74-78 W in P0
            interconnect="nvlink",  # NVLink 4 via NVSwitch (HGX H200)
            interconnect_gb_s=450.0,  # H200 datasheet: NVLink 900 GB/s bidirectional -> 450 per direction
            interconnect_latency_us=6.0,  # estimate, nccl-tests all_reduce_perf small messages on NVSwitch
        ),
        GPUSpec(
            name="a100-40gb",
            memory_mib=40960,  # nvidia-smi "NVIDIA A100-SXM4-40GB": 40960MiB total
            memory_bandwidth_gb_s=1555.0,  # NVIDIA A100 datasheet (40GB SXM): 1,555 GB/s
            dense_tflops={
                "fp32": 19.5,  # NVIDIA A100 datasheet: FP32 19.5 TFLOPS
                "bf16": 312.0,  # A100 datasheet: BF16 312 dense (624 with sparsity)
                "fp16": 312.0,  # A100 datasheet: FP16 312 dense (624 with sparsity)
            },  # no fp8: Ampere tensor cores have no FP8 (A100 datasheet)
            tdp_w=400.0,  # A100 datasheet (SXM): 400 W
            idle_w=55.0,  # nvidia-smi idle logs of A100-SXM4-40GB: 50-63 W in P0
            interconnect="nvlink",  # NVLink 3 via NVSwitch (HGX A100)
            interconnect_gb_s=300.0,  # A100 datasheet: NVLink 600 GB/s bidirectional -> 300 per direction
            interconnect_latency_us=8.0,  # estimate, nccl-tests all_reduce_perf small messages on NVSwitch
        ),
        GPUSpec(
            name="a100-80gb",
            memory_mib=81920,  # nvidia-smi "NVIDIA A100-SXM4-80GB": 81920MiB total
            memory_bandwidth_gb_s=2039.0,  # NVIDIA A100 datasheet (80GB SXM): 2,039 GB/s
            dense_tflops={
                "fp32": 19.5,  # NVIDIA A100 datasheet: FP32 19.5 TFLOPS
                "bf16": 312.0,  # A100 datasheet: BF16 312 dense (624 with sparsity)
                "fp16": 312.0,  # A100 datasheet: FP16 312 dense (624 with sparsity)
            },  # no fp8: Ampere tensor cores have no FP8 (A100 datasheet)
            tdp_w=400.0,  # A100 datasheet (SXM): 400 W
            idle_w=55.0,  # nvidia-smi idle logs of A100-SXM4-80GB: 50-64 W in P0
            interconnect="nvlink",  # NVLink 3 via NVSwitch (HGX A100)
            interconnect_gb_s=300.0,  # A100 datasheet: NVLink 600 GB/s bidirectional -> 300 per direction
            interconnect_latency_us=8.0,  # estimate, nccl-tests all_reduce_perf small messages on NVSwitch
        ),
        GPUSpec(
            name="l40s",
            memory_mib=46068,  # nvidia-smi "NVIDIA L40S": 46068MiB total
            memory_bandwidth_gb_s=864.0,  # NVIDIA L40S datasheet: 864 GB/s GDDR6
            dense_tflops={
                "fp32": 91.6,  # NVIDIA L40S datasheet: FP32 91.6 TFLOPS
                "bf16": 362.05,  # L40S datasheet: BF16 362.05 dense (733 with sparsity)
                "fp16": 362.05,  # L40S datasheet: FP16 362.05 dense (733 with sparsity)
                "fp8": 733.0,  # L40S datasheet: FP8 733 dense (1,466 with sparsity)
            },
            tdp_w=350.0,  # L40S datasheet: max power 350 W
            idle_w=35.0,  # nvidia-smi idle logs of L40S: 20-33 W (P8) and higher in P0; estimate
            interconnect="pcie",  # PCIe Gen4 x16, no NVLink (L40S datasheet)
            interconnect_gb_s=32.0,  # L40S datasheet: PCIe Gen4 x16 64 GB/s bidirectional -> 32
            interconnect_latency_us=20.0,  # estimate, nccl-tests all_reduce_perf small messages over PCIe
        ),
        GPUSpec(
            name="l4",
            memory_mib=23034,  # nvidia-smi "NVIDIA L4": 23034MiB total
            memory_bandwidth_gb_s=300.0,  # NVIDIA L4 datasheet: 300 GB/s GDDR6
            dense_tflops={
                "fp32": 30.3,  # NVIDIA L4 datasheet: FP32 30.3 TFLOPS
                "bf16": 121.0,  # L4 datasheet: BF16 242 with sparsity -> 121 dense
                "fp16": 121.0,  # L4 datasheet: FP16 242 with sparsity -> 121 dense
                "fp8": 242.5,  # L4 datasheet: FP8 485 with sparsity -> 242.5 dense
            },
            tdp_w=72.0,  # L4 datasheet: 72 W
            idle_w=25.0,  # nvidia-smi idle logs of L4: 14-19 W in P8, 25-27 W in P0
            interconnect="pcie",  # PCIe Gen4 x16 (L4 datasheet)
            interconnect_gb_s=32.0,  # PCIe Gen4 x16: 64 GB/s bidirectional -> 32 per direction
            interconnect_latency_us=20.0,  # estimate, nccl-tests all_reduce_perf small messages over PCIe
        ),
        GPUSpec(
            name="a10g",
            memory_mib=23028,  # nvidia-smi "NVIDIA A10G" (AWS g5): 23028MiB total
            memory_bandwidth_gb_s=600.0,  # NVIDIA A10G datasheet (AWS, 2022-02-17): 600 GB/s GDDR6
            dense_tflops={
                "fp32": 35.0,  # NVIDIA A10G datasheet (AWS, 2022-02-17): FP32 35 TFLOPS
                "bf16": 70.0,  # A10G datasheet: BF16 70 dense (140 with sparsity)
                "fp16": 70.0,  # A10G datasheet: FP16 70 dense (140 with sparsity)
            },  # no fp8: Ampere GA102 tensor cores have no FP8
            tdp_w=300.0,  # nvidia-smi "NVIDIA A10G" power cap: 300 W
            idle_w=30.0,  # nvidia-smi idle logs of A10G: 14 W in P8, 31 W in P0
            interconnect="pcie",  # PCIe Gen4 x16 (AWS g5 instances)
            interconnect_gb_s=32.0,  # PCIe Gen4 x16: 64 GB/s bidirectional -> 32 per direction
            interconnect_latency_us=20.0,  # estimate, nccl-tests all_reduce_perf small messages over PCIe
        ),
        GPUSpec(
            name="t4",
            memory_mib=15360,  # nvidia-smi "Tesla T4": 15360MiB total
            memory_bandwidth_gb_s=320.0,  # NVIDIA T4 datasheet: 320 GB/s GDDR6
            dense_tflops={
                "fp32": 8.1,  # NVIDIA T4 datasheet: single precision 8.1 TFLOPS
                "fp16": 65.0,  # T4 datasheet: mixed precision (FP16/FP32) 65 TFLOPS
            },  # no bf16, no fp8: Turing tensor cores support neither (T4 datasheet)
            tdp_w=70.0,  # T4 datasheet: 70 W
            idle_w=25.0,  # nvidia-smi idle logs of T4: 10 W in P8, 25-27 W in P0
            interconnect="pcie",  # PCIe Gen3 x16 (T4 datasheet)
            interconnect_gb_s=16.0,  # PCIe Gen3 x16: 32 GB/s bidirectional -> 16 per direction
            interconnect_latency_us=25.0,  # estimate, nccl-tests all_reduce_perf small messages over PCIe
        ),
        GPUSpec(
            name="rtx-4090",
            memory_mib=24564,  # nvidia-smi "NVIDIA GeForce RTX 4090": 24564MiB total
            memory_bandwidth_gb_s=1008.0,  # NVIDIA Ada Lovelace whitepaper (RTX 4090): 1,008 GB/s GDDR6X
            dense_tflops={
                "fp32": 82.6,  # Ada Lovelace whitepaper (RTX 4090): FP32 82.6 TFLOPS
                "bf16": 165.2,  # Ada whitepaper: BF16 tensor, FP32 accumulate, 165.2 dense
                "fp16": 165.2,  # Ada whitepaper: FP16 tensor, FP32 accumulate, 165.2 dense (330.3 FP16 acc.)
                "fp8": 330.3,  # Ada whitepaper: FP8 tensor, FP32 accumulate, 330.3 dense
            },
            tdp_w=450.0,  # Ada whitepaper / nvidia-smi power cap: 450 W total board power
            idle_w=20.0,  # nvidia-smi idle logs of RTX 4090: 16-20 W (P8); estimate
            interconnect="pcie",  # PCIe Gen4 x16; GeForce has no NVLink and no peer-to-peer
            interconnect_gb_s=32.0,  # PCIe Gen4 x16: 64 GB/s bidirectional -> 32 (upper bound, via host)
            interconnect_latency_us=30.0,  # estimate, nccl-tests all_reduce_perf through host memory
        ),
        GPUSpec(
            name="b200",
            memory_mib=183359,  # nvidia-smi "NVIDIA B200" (HGX B200): 183359MiB total
            memory_bandwidth_gb_s=7700.0,  # NVIDIA HGX B200 datasheet: 180 GB HBM3e at 7.7 TB/s per GPU
            dense_tflops={
                "fp32": 75.0,  # NVIDIA HGX B200 datasheet: FP32 75 TFLOPS per GPU
                "bf16": 2250.0,  # HGX B200 datasheet: FP16/BF16 4.5 PFLOPS with sparsity -> 2,250 dense
                "fp16": 2250.0,  # HGX B200 datasheet: FP16/BF16 4.5 PFLOPS with sparsity -> 2,250 dense
                "fp8": 4500.0,  # HGX B200 datasheet: FP8 9 PFLOPS with sparsity -> 4,500 dense
            },
            tdp_w=1000.0,  # HGX B200 datasheet: configurable up to 1,000 W
            idle_w=140.0,  # nvidia-smi idle logs of B200: 136-145 W in P0
            interconnect="nvlink",  # NVLink 5 via NVSwitch (HGX B200)
            interconnect_gb_s=900.0,  # HGX B200 datasheet: NVLink 1.8 TB/s bidirectional -> 900
            interconnect_latency_us=6.0,  # estimate, nccl-tests all_reduce_perf small messages on NVSwitch
        ),
        GPUSpec(
            name="mi300x",
            memory_mib=196288,  # rocm-smi "VRAM Total Memory (B): 205822885888" = 196288 MiB (192 GB HBM3)
            memory_bandwidth_gb_s=5300.0,  # AMD Instinct MI300X datasheet: 5.3 TB/s
            dense_tflops={
                "fp32": 81.7,  # AMD Instinct MI300X datasheet: FP32 vector 81.7 TFLOPS (163.4 matrix)
                "bf16": 1307.4,  # MI300X datasheet: BF16 1,307.4 dense (2,614.9 with sparsity)
                "fp16": 1307.4,  # MI300X datasheet: FP16 1,307.4 dense (2,614.9 with sparsity)
                "fp8": 2614.9,  # MI300X datasheet: FP8 2,614.9 dense (5,229.8 with sparsity)
            },
            tdp_w=750.0,  # MI300X datasheet: 750 W TBP; rocm-smi PwrCap 750 W
            idle_w=140.0,  # rocm-smi idle logs of MI300X: 135-180 W socket power
            interconnect="infinity-fabric",  # 7 xGMI links, fully connected 8-GPU mesh
            interconnect_gb_s=448.0,  # MI300X datasheet: 896 GB/s aggregate P2P bidirectional -> 448
            interconnect_latency_us=10.0,  # estimate, rccl-tests all_reduce_perf small messages on xGMI
        ),
    )
)


# --------------------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, from its HF ``config.json``; parameter counts are derived properties.

    Per layer: an attention block (q, k, v, o projections), an MLP block (``num_experts`` experts, each
    gate/up/down when ``gated_mlp`` else up/down, plus a router when ``num_experts > 1``) and two norms;
    one final norm; token embeddings (plus learned position embeddings for GPT-2); an LM head that is the
    embedding matrix when ``tie_word_embeddings``.
    """

    name: str  # catalog key
    hf_id: str  # Hugging Face repository id the dimensions come from
    hidden_size: int
    intermediate_size: int  # per expert for MoE models
    num_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    num_experts: int = 1
    experts_per_token: int = 1
    head_dim: int | None = None  # default hidden_size // num_attention_heads
    gated_mlp: bool = True  # SwiGLU (gate, up, down) vs GPT-2 (up, down)
    attention_bias: bool = False  # biases on q, k, v (Qwen2.5, GPT-2)
    mlp_bias: bool = False  # biases on every MLP projection (GPT-2)
    learned_position_embeddings: bool = False  # GPT-2 wpe: max_position_embeddings x hidden_size
    layernorm: bool = False  # LayerNorm (weight + bias) vs RMSNorm (weight only)
    attention_output_bias: bool = False  # bias on the o projection (GPT-2 attn.c_proj; not Qwen2.5)

    def __post_init__(self) -> None:
        dims = {
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_layers": self.num_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "num_experts": self.num_experts,
            "experts_per_token": self.experts_per_token,
        }
        for key, value in dims.items():
            if not (isinstance(value, int) and value > 0):
                raise ValueError(f"{self.name}: {key} must be a positive int, got {value!r}")
        if self.experts_per_token > self.num_experts:
            raise ValueError(f"{self.name}: experts_per_token exceeds num_experts")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.name}: num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ValueError(f"{self.name}: hidden_size not divisible by heads; give head_dim explicitly")
        if self.head_dim is not None and self.head_dim <= 0:
            raise ValueError(f"{self.name}: head_dim must be positive")

    @property
    def head_dim_(self) -> int:
        """Resolved head dimension."""
        return self.head_dim if self.head_dim is not None else self.hidden_size // self.num_attention_heads

    # Per-layer building blocks (stored parameters).

    @property
    def _attention_params_per_layer(self) -> int:
        q_dim = self.num_attention_heads * self.head_dim_
        kv_dim = self.num_key_value_heads * self.head_dim_
        weights = self.hidden_size * (q_dim + 2 * kv_dim) + q_dim * self.hidden_size  # q, k, v, o
        qkv_biases = q_dim + 2 * kv_dim if self.attention_bias else 0
        output_bias = self.hidden_size if self.attention_output_bias else 0
        return weights + qkv_biases + output_bias

    @property
    def _params_per_expert(self) -> int:
        matrices = 3 if self.gated_mlp else 2
        weights = matrices * self.hidden_size * self.intermediate_size
        biases = (matrices - 1) * self.intermediate_size + self.hidden_size if self.mlp_bias else 0
        return weights + biases

    @property
    def _router_params_per_layer(self) -> int:
        return self.hidden_size * self.num_experts if self.num_experts > 1 else 0

    @property
    def _params_per_norm(self) -> int:
        return self.hidden_size * (2 if self.layernorm else 1)

    # Derived counts.

    @cached_property
    def params_by_group(self) -> Mapping[str, int]:
        """Stored parameters per module group (all experts; ``lm_head`` is 0 when tied)."""
        embedding = self.vocab_size * self.hidden_size
        if self.learned_position_embeddings:
            embedding += self.max_position_embeddings * self.hidden_size
        mlp = self.num_layers * (self.num_experts * self._params_per_expert + self._router_params_per_layer)
        counts = {
            "embedding": embedding,
            "attention": self.num_layers * self._attention_params_per_layer,
            "mlp": mlp,
            "norm": (2 * self.num_layers + 1) * self._params_per_norm,
            "lm_head": 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size,
        }
        return MappingProxyType({group: counts[group] for group in MODULE_GROUPS})

    @cached_property
    def gemm_params_by_group(self) -> Mapping[str, int]:
        """Parameters taking part in a matmul for one token (active experts only; the head even if tied)."""
        active_mlp = self.experts_per_token * self._params_per_expert + self._router_params_per_layer
        counts = {
            "embedding": 0,  # a lookup, not a GEMM
            "attention": self.params_by_group["attention"],
            "mlp": self.num_layers * active_mlp,
            "norm": 0,  # elementwise
            "lm_head": self.vocab_size * self.hidden_size,
        }
        return MappingProxyType({group: counts[group] for group in MODULE_GROUPS})

    @cached_property
    def num_params(self) -> int:
        """Total stored parameters."""
        return sum(self.params_by_group.values())

    @cached_property
    def num_active_params(self) -> int:
        """Parameters used per token: everything stored except the experts a token is not routed to."""
        inactive_experts = self.num_experts - self.experts_per_token
        return self.num_params - self.num_layers * inactive_experts * self._params_per_expert

    def kv_cache_bytes_per_token(self, bytes_per_element: float = 2.0) -> float:
        """K and V for every layer: 2 * layers * kv_heads * head_dim * bytes_per_element."""
        return 2.0 * self.num_layers * self.num_key_value_heads * self.head_dim_ * bytes_per_element


MODELS: Mapping[str, ModelSpec] = _index(
    (
        ModelSpec(
            name="llama-3.1-8b",
            hf_id="meta-llama/Llama-3.1-8B",
            hidden_size=4096,  # meta-llama/Llama-3.1-8B config.json
            intermediate_size=14336,  # meta-llama/Llama-3.1-8B config.json
            num_layers=32,  # meta-llama/Llama-3.1-8B config.json num_hidden_layers
            num_attention_heads=32,  # meta-llama/Llama-3.1-8B config.json
            num_key_value_heads=8,  # meta-llama/Llama-3.1-8B config.json
            vocab_size=128256,  # meta-llama/Llama-3.1-8B config.json
            max_position_embeddings=131072,  # meta-llama/Llama-3.1-8B config.json
            tie_word_embeddings=False,  # meta-llama/Llama-3.1-8B config.json
        ),
        ModelSpec(
            name="llama-3.1-70b",
            hf_id="meta-llama/Llama-3.1-70B",
            hidden_size=8192,  # meta-llama/Llama-3.1-70B config.json
            intermediate_size=28672,  # meta-llama/Llama-3.1-70B config.json
            num_layers=80,  # meta-llama/Llama-3.1-70B config.json num_hidden_layers
            num_attention_heads=64,  # meta-llama/Llama-3.1-70B config.json
            num_key_value_heads=8,  # meta-llama/Llama-3.1-70B config.json
            vocab_size=128256,  # meta-llama/Llama-3.1-70B config.json
            max_position_embeddings=131072,  # meta-llama/Llama-3.1-70B config.json
            tie_word_embeddings=False,  # meta-llama/Llama-3.1-70B config.json
        ),
        ModelSpec(
            name="mistral-7b",
            hf_id="mistralai/Mistral-7B-v0.1",
            hidden_size=4096,  # mistralai/Mistral-7B-v0.1 config.json
            intermediate_size=14336,  # mistralai/Mistral-7B-v0.1 config.json
            num_layers=32,  # mistralai/Mistral-7B-v0.1 config.json num_hidden_layers
            num_attention_heads=32,  # mistralai/Mistral-7B-v0.1 config.json
            num_key_value_heads=8,  # mistralai/Mistral-7B-v0.1 config.json
            vocab_size=32000,  # mistralai/Mistral-7B-v0.1 config.json
            max_position_embeddings=32768,  # mistralai/Mistral-7B-v0.1 config.json (sliding window 4096)
            tie_word_embeddings=False,  # mistralai/Mistral-7B-v0.1 config.json
        ),
        ModelSpec(
            name="qwen2.5-7b",
            hf_id="Qwen/Qwen2.5-7B",
            hidden_size=3584,  # Qwen/Qwen2.5-7B config.json
            intermediate_size=18944,  # Qwen/Qwen2.5-7B config.json
            num_layers=28,  # Qwen/Qwen2.5-7B config.json num_hidden_layers
            num_attention_heads=28,  # Qwen/Qwen2.5-7B config.json
            num_key_value_heads=4,  # Qwen/Qwen2.5-7B config.json
            vocab_size=152064,  # Qwen/Qwen2.5-7B config.json
            max_position_embeddings=131072,  # Qwen/Qwen2.5-7B config.json
            tie_word_embeddings=False,  # Qwen/Qwen2.5-7B config.json
            attention_bias=True,  # Qwen2 architecture (transformers Qwen2Attention): q/k/v bias, no o bias
        ),
        ModelSpec(
            name="qwen2.5-72b",
            hf_id="Qwen/Qwen2.5-72B",
            hidden_size=8192,  # Qwen/Qwen2.5-72B config.json
            intermediate_size=29568,  # Qwen/Qwen2.5-72B config.json
            num_layers=80,  # Qwen/Qwen2.5-72B config.json num_hidden_layers
            num_attention_heads=64,  # Qwen/Qwen2.5-72B config.json
            num_key_value_heads=8,  # Qwen/Qwen2.5-72B config.json
            vocab_size=152064,  # Qwen/Qwen2.5-72B config.json
            max_position_embeddings=131072,  # Qwen/Qwen2.5-72B config.json
            tie_word_embeddings=False,  # Qwen/Qwen2.5-72B config.json
            attention_bias=True,  # Qwen2 architecture (transformers Qwen2Attention): q/k/v bias, no o bias
        ),
        ModelSpec(
            name="mixtral-8x7b",
            hf_id="mistralai/Mixtral-8x7B-v0.1",
            hidden_size=4096,  # mistralai/Mixtral-8x7B-v0.1 config.json
            intermediate_size=14336,  # mistralai/Mixtral-8x7B-v0.1 config.json (per expert)
            num_layers=32,  # mistralai/Mixtral-8x7B-v0.1 config.json num_hidden_layers
            num_attention_heads=32,  # mistralai/Mixtral-8x7B-v0.1 config.json
            num_key_value_heads=8,  # mistralai/Mixtral-8x7B-v0.1 config.json
            vocab_size=32000,  # mistralai/Mixtral-8x7B-v0.1 config.json
            max_position_embeddings=32768,  # mistralai/Mixtral-8x7B-v0.1 config.json
            tie_word_embeddings=False,  # mistralai/Mixtral-8x7B-v0.1 config.json
            num_experts=8,  # mistralai/Mixtral-8x7B-v0.1 config.json num_local_experts
            experts_per_token=2,  # mistralai/Mixtral-8x7B-v0.1 config.json num_experts_per_tok
        ),
        ModelSpec(
            name="gpt2",
            hf_id="openai-community/gpt2",
            hidden_size=768,  # openai-community/gpt2 config.json n_embd
            intermediate_size=3072,  # openai-community/gpt2 config.json n_inner null -> 4 * n_embd
            num_layers=12,  # openai-community/gpt2 config.json n_layer
            num_attention_heads=12,  # openai-community/gpt2 config.json n_head
            num_key_value_heads=12,  # openai-community/gpt2 config.json: multi-head attention (no GQA)
            vocab_size=50257,  # openai-community/gpt2 config.json
            max_position_embeddings=1024,  # openai-community/gpt2 config.json n_positions
            tie_word_embeddings=True,  # openai-community/gpt2: lm_head shares wte
            gated_mlp=False,  # GPT-2 MLP: c_fc, gelu, c_proj
            attention_bias=True,  # GPT-2 attn.c_attn (q, k, v) has a bias
            attention_output_bias=True,  # GPT-2 attn.c_proj has a bias
            mlp_bias=True,  # GPT-2 mlp.c_fc and mlp.c_proj have biases
            learned_position_embeddings=True,  # GPT-2 wpe
            layernorm=True,  # GPT-2 ln_1, ln_2, ln_f are LayerNorm (weight + bias)
        ),
    )
)


def _main() -> None:
    """Print both tables (a quick look at what the kernel sees)."""
    gpu_row = "{:<10} {:>7} {:>8} {:>8} {:>7} {:>6} {:>9}"
    print(gpu_row.format("gpu", "mem GB", "BW GB/s", "bf16 TF", "fp8 TF", "TDP W", "link GB/s"))
    for gpu in GPUS.values():
        bf16 = gpu.dense_tflops.get("bf16")
        fp8 = gpu.dense_tflops.get("fp8")
        print(
            gpu_row.format(
                gpu.name,
                f"{gpu.memory_gb:.1f}",
                f"{gpu.memory_bandwidth_gb_s:.0f}",
                "-" if bf16 is None else f"{bf16:.1f}",
                "-" if fp8 is None else f"{fp8:.1f}",
                f"{gpu.tdp_w:.0f}",
                f"{gpu.interconnect_gb_s:.0f}",
            )
        )
    print()
    model_row = "{:<14} {:>9} {:>9} {:>20}"
    print(model_row.format("model", "params B", "active B", "KV KiB/token (bf16)"))
    for model in MODELS.values():
        print(
            model_row.format(
                model.name,
                f"{model.num_params / 1e9:.3f}",
                f"{model.num_active_params / 1e9:.3f}",
                f"{model.kv_cache_bytes_per_token() / 1024:.0f}",
            )
        )


if __name__ == "__main__":
    _main()
