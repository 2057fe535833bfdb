"""The GPU table: memory, bandwidth, dense peak per compute precision, power and link of each accelerator.

Every figure carries its source in a trailing comment; the simplifications are in ``fleet_rl.catalog``'s
docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from fleet_rl.catalog.formats import (
    COMPUTE_PRECISIONS,
    INTERCONNECTS,
    WEIGHT_ONLY_PRECISIONS,
    read_only_index,
)

__all__ = ["GPUS", "GPUSpec"]


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


GPUS: Mapping[str, GPUSpec] = read_only_index(
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
            interconnect_latency_us=13.0,  # NCCL small-message all-reduce on NVSwitch (catalog docstring)
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
            interconnect_latency_us=13.0,  # NCCL small-message all-reduce on NVSwitch (catalog docstring)
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
            interconnect_latency_us=13.0,  # NCCL small-message all-reduce on NVSwitch (catalog docstring)
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
            interconnect_latency_us=13.0,  # NCCL small-message all-reduce on NVSwitch (catalog docstring)
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
            interconnect_latency_us=13.0,  # NCCL small-message all-reduce on NVSwitch (catalog docstring)
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
