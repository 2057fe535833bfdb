"""Per-job constants of one or more scenarios as a structure of arrays (shape ``(J,)`` or ``(J, 5)``).

The simulator gathers these by job index, so a batch of plans for many scenarios costs one gather per
field instead of a Python loop. Built once per scenario and cached with the scenario's optimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet_rl.catalog import GPUS, MODELS, MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.constants import (
    BF16,
    FORMAT_EFFICIENCY,
    FP16,
    GROUP_SENSITIVITY,
    KINDS,
    LORA_RANK,
    WEIGHT_ONLY,
)


@dataclass(frozen=True)
class JobTable:
    """Structure of arrays; every field has a leading job axis J. Units as suffixes."""

    kind: np.ndarray  # (J,) int, index into KINDS
    priority: np.ndarray  # (J,)
    seq_len: np.ndarray  # (J,) tokens
    batch_size: np.ndarray  # (J,) sequences
    max_quality_loss: np.ndarray  # (J,) inf when unconstrained
    num_layers: np.ndarray  # (J,)
    hidden_size: np.ndarray  # (J,)
    attention_dim: np.ndarray  # (J,) heads · head_dim
    kv_dim: np.ndarray  # (J,) kv_heads · head_dim
    num_heads: np.ndarray  # (J,)
    num_kv_heads: np.ndarray  # (J,)
    vocab_size: np.ndarray  # (J,)
    num_experts: np.ndarray  # (J,)
    experts_per_token: np.ndarray  # (J,)
    params_stored: np.ndarray  # (J, 5) parameters held in memory per module group
    params_gemm: np.ndarray  # (J, 5) parameters in a matmul per token per module group
    quality_weight: np.ndarray  # (J, 5) share of parameters · group sensitivity
    lora_params: np.ndarray  # (J,) LoRA adapter parameters (rank LORA_RANK, all linear layers)
    gpu_count: np.ndarray  # (J,) GPUs in the job's cluster
    memory_capacity_bytes: np.ndarray  # (J,)
    memory_bandwidth_bytes_s: np.ndarray  # (J,)
    effective_flops: np.ndarray  # (J, 6) achievable GEMM FLOP/s per weight format (nan = unsupported)
    supported: np.ndarray  # (J, 6) bool: the GPU runs this format
    attention_flops: np.ndarray  # (J,) FLOP/s of the attention core (bf16, or fp16 without bf16)
    link_bytes_s: np.ndarray  # (J,) per-direction GPU-to-GPU bandwidth
    link_latency_s: np.ndarray  # (J,)
    tdp_w: np.ndarray  # (J,)
    idle_w: np.ndarray  # (J,)
    cluster_tdp_w: np.ndarray  # (J,) count · TDP, the energy normaliser
    default_kv: np.ndarray  # (J,) precision code of the 16-bit format the GPU supports

    @property
    def num_jobs(self) -> int:
        return int(self.kind.shape[0])

    @staticmethod
    def concatenate(tables: list[JobTable]) -> JobTable:
        """Stack several tables along the job axis (for batches spanning scenarios)."""
        fields = JobTable.__dataclass_fields__
        return JobTable(**{name: np.concatenate([getattr(t, name) for t in tables]) for name in fields})


def _lora_adapter_params(model) -> int:
    """r·(d_in + d_out) per adapted matrix: q, k, v, o and every expert's MLP matrices."""
    h, head_dim = model.hidden_size, model.head_dim_
    q_out, kv_out = model.num_attention_heads * head_dim, model.num_key_value_heads * head_dim
    attention = (h + q_out) + 2 * (h + kv_out) + (q_out + h)
    mlp_matrices = 3 if model.gated_mlp else 2
    mlp = model.num_experts * mlp_matrices * (h + model.intermediate_size)
    return LORA_RANK * model.num_layers * (attention + mlp)


def build_job_table(scenario) -> JobTable:
    """Gather catalog figures for every job of ``scenario`` (a ``fleet_rl.Scenario``)."""
    gpu = GPUS[scenario.cluster.gpu]
    rows: dict[str, list] = {name: [] for name in JobTable.__dataclass_fields__}
    peak = np.array([gpu.dense_tflops.get(p, np.nan) * 1e12 for p in PRECISIONS[:4]])
    sixteen_bit = BF16 if gpu.supports("bf16") else FP16
    peak_all = np.concatenate([peak, [peak[sixteen_bit], peak[sixteen_bit]]])
    effective = peak_all * FORMAT_EFFICIENCY
    supported = np.array([gpu.supports(p) for p in PRECISIONS])
    effective = np.where(supported | WEIGHT_ONLY, effective, np.nan)
    for job in scenario.jobs:
        model = MODELS[job.model]
        stored = np.array([model.params_by_group[g] for g in MODULE_GROUPS], dtype=np.float64)
        gemm = np.array([model.gemm_params_by_group[g] for g in MODULE_GROUPS], dtype=np.float64)
        values = {
            "kind": KINDS.index(job.kind),
            "priority": float(job.priority),
            "seq_len": float(job.seq_len),
            "batch_size": float(job.batch_size),
            "max_quality_loss": np.inf if job.max_quality_loss is None else float(job.max_quality_loss),
            "num_layers": float(model.num_layers),
            "hidden_size": float(model.hidden_size),
            "attention_dim": float(model.num_attention_heads * model.head_dim_),
            "kv_dim": float(model.num_key_value_heads * model.head_dim_),
            "num_heads": model.num_attention_heads,
            "num_kv_heads": float(model.num_key_value_heads),
            "vocab_size": float(model.vocab_size),
            "num_experts": float(model.num_experts),
            "experts_per_token": float(model.experts_per_token),
            "params_stored": stored,
            "params_gemm": gemm,
            "quality_weight": stored / stored.sum() * GROUP_SENSITIVITY,
            "lora_params": float(_lora_adapter_params(model)),
            "gpu_count": scenario.cluster.count,
            "memory_capacity_bytes": gpu.memory_gb * 1e9,
            "memory_bandwidth_bytes_s": gpu.memory_bandwidth_gb_s * 1e9,
            "effective_flops": effective,
            "supported": supported,
            "attention_flops": peak[sixteen_bit],
            "link_bytes_s": gpu.interconnect_gb_s * 1e9,
            "link_latency_s": gpu.interconnect_latency_us * 1e-6,
            "tdp_w": gpu.tdp_w,
            "idle_w": gpu.idle_w,
            "cluster_tdp_w": gpu.tdp_w * scenario.cluster.count,
            "default_kv": sixteen_bit,
        }
        for name, value in values.items():
            rows[name].append(value)
    return JobTable(**{name: np.array(values) for name, values in rows.items()})
