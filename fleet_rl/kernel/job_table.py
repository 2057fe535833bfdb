"""Per-job constants of one or more scenarios as a structure of arrays (shape ``(J,)`` or ``(J, 5)``).

The simulator gathers these by job index, so a batch of plans for many scenarios costs one gather per
field instead of a Python loop. Built once per scenario and cached with the scenario's optimum.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

import numpy as np

from fleet_rl.catalog import GPUS, MODELS, MODULE_GROUPS, PRECISIONS
from fleet_rl.kernel.constants import (
    ATTENTION,
    BF16,
    BYTES_PER_PARAM,
    EMBEDDING,
    FORMAT_EFFICIENCY,
    FP8,
    FP16,
    GROUP_SENSITIVITY,
    INT8,
    KINDS,
    LM_HEAD,
    LOGIT_BYTES,
    LORA_RANK,
    MEMORY_BANDWIDTH_UTILISATION,
    MLP,
    NORM,
    QUALITY_ERROR,
    STREAMED_BYTES_PER_PARAM,
    TRAIN_FLOPS_PER_PARAM,
    UNSTABLE_FORMAT,
    WEIGHT_ONLY,
)
from fleet_rl.kernel.constants import TRAIN as TRAIN_KIND


@dataclass(frozen=True)
class JobTable:
    """Structure of arrays; every field has a leading job axis J. Units as suffixes."""

    kind: np.ndarray  # (J,) int, index into KINDS
    priority: np.ndarray  # (J,)
    seq_len: np.ndarray  # (J,) tokens
    batch_size: np.ndarray  # (J,) sequences
    max_quality_loss: np.ndarray  # (J,) inf when unconstrained
    min_tokens_per_s: np.ndarray  # (J,) throughput floor; 0 when unset
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
    params_total: np.ndarray  # (J,) Σ params_stored
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
    # derived per-job constants, precomputed so the kernel does fewer passes over rows
    attention_s_per_token: np.ndarray  # (J,) 2·layers·seq·attention_dim / attention FLOP/s (causal fwd)
    adapter_s_per_token: np.ndarray  # (J,) 6·LoRA params / FLOP/s (0 unless lora)
    trained_params: np.ndarray  # (J,) parameters receiving gradients (all for train, adapters for lora)
    kv_elements_per_token: np.ndarray  # (J,) 2·layers·kv_dim
    kv_read_fraction: np.ndarray  # (J,) mean context of a decode step ÷ seq_len: (prompt + output/2)/seq
    prompt_per_output_token: np.ndarray  # (J,) prompt_len ÷ generated tokens per request (0: decode only)
    prefill_attention_s_per_token: np.ndarray  # (J,) causal attention over the prompt, per prompt token
    logit_bytes_per_token: np.ndarray  # (J,) vocab · LOGIT_BYTES
    effective_bandwidth_bytes_s: np.ndarray  # (J,) bandwidth · MEMORY_BANDWIDTH_UTILISATION
    log_expert_miss: np.ndarray  # (J,) log(1 − experts_per_token/num_experts); 0 for dense models
    # Precision-map aggregates, split in two halves so a row needs two 1-D lookups instead of 5-wide sums:
    # half A = (embedding, attention, mlp), code p_e·36 + p_a·6 + p_m (216 maps); half B = (norm, lm_head),
    # code p_n·6 + p_l (36 maps). Shapes (J, 216) and (J, 36).
    a_weight_bytes: np.ndarray  # Σ stored params · bytes/param
    b_weight_bytes: np.ndarray
    a_gemm_s_per_flop: np.ndarray  # Σ GEMM params / effective FLOP/s (nan if a format is unsupported)
    b_gemm_s_per_flop: np.ndarray
    a_quality_loss: np.ndarray  # Σ share · sensitivity · format error for this job's kind
    b_quality_loss: np.ndarray
    a_fp8_params: np.ndarray  # params of groups in fp8 (Transformer Engine weight cache when training)
    b_fp8_params: np.ndarray
    a_unsupported: np.ndarray  # bool: a format the GPU lacks, or an integer format for trained weights
    b_unsupported: np.ndarray
    a_unstable: np.ndarray  # bool: a group in a format that diverges (UNSTABLE_FORMAT)
    b_unstable: np.ndarray
    # decode: bytes streamed per step, ÷ the format's stream efficiency (STREAMED_BYTES_PER_PARAM)
    a_streamed_bytes: np.ndarray  # attention (the MLP is separate: MoE touches a fraction of its experts)
    a_mlp_bytes: np.ndarray
    b_streamed_bytes: np.ndarray  # decode: norm bytes + lm_head GEMM bytes (a tied head is streamed too)

    @property
    def num_jobs(self) -> int:
        return int(self.kind.shape[0])

    @staticmethod
    def concatenate(tables: list[JobTable]) -> JobTable:
        """Stack several tables along the job axis (for batches spanning scenarios)."""
        fields = JobTable.__dataclass_fields__
        return JobTable(**{name: np.concatenate([getattr(t, name) for t in tables]) for name in fields})

    def packed(self) -> PackedJobTable:
        """The table with its fields of one dtype and trailing shape stacked into one block each, so that
        stacking tables costs one ``np.concatenate`` per block instead of one per field (54)."""
        values = _get_fields(self)
        groups: dict[tuple, list[int]] = {}
        for i, value in enumerate(values):
            groups.setdefault((value.dtype.str, value.shape[1:]), []).append(i)
        layout = tuple((key, tuple(indices)) for key, indices in groups.items())
        return PackedJobTable(layout, tuple(np.stack([values[i] for i in indices]) for _, indices in layout))


_FIELDS = tuple(JobTable.__dataclass_fields__)
_get_fields = operator.attrgetter(*_FIELDS)


@dataclass(frozen=True)
class PackedJobTable:
    """A ``JobTable`` as blocks of like fields (``JobTable.packed``): ``blocks[g]`` is (fields, J, ...) and
    ``layout[g]`` names its (dtype, trailing shape) and the fields' indices in ``JobTable`` order."""

    layout: tuple[tuple[tuple, tuple[int, ...]], ...]
    blocks: tuple[np.ndarray, ...]

    @staticmethod
    def concatenate(packs: list[PackedJobTable]) -> JobTable:
        """``JobTable.concatenate`` of the tables: the same values, dtypes and shapes, every field
        C-contiguous; one ``np.concatenate`` per block (falls back to per field if the layouts differ)."""
        layout = packs[0].layout
        if any(pack.layout != layout for pack in packs):
            return JobTable.concatenate([pack.unpacked() for pack in packs])
        blocks = [np.concatenate([pack.blocks[g] for pack in packs], axis=1) for g in range(len(layout))]
        return PackedJobTable(layout, tuple(blocks)).unpacked()

    def unpacked(self) -> JobTable:
        """The ``JobTable`` whose fields are views of the blocks (each C-contiguous)."""
        fields: list = [None] * len(_FIELDS)
        for block, (_, indices) in zip(self.blocks, self.layout, strict=True):
            for k, i in enumerate(indices):
                fields[i] = block[k]
        return JobTable(*fields)


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
            "min_tokens_per_s": 0.0 if job.min_tokens_per_s is None else float(job.min_tokens_per_s),
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
            "params_total": stored.sum(),
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
        layers, kind = model.num_layers, job.kind
        attention_dim = model.num_attention_heads * model.head_dim_
        values["attention_s_per_token"] = (
            2.0 * layers * job.seq_len * attention_dim / values["attention_flops"]
        )
        adapter_flops = TRAIN_FLOPS_PER_PARAM * values["lora_params"]
        values["adapter_s_per_token"] = adapter_flops / values["attention_flops"] if kind == "lora" else 0.0
        values["trained_params"] = values["params_total"] if kind == "train" else values["lora_params"]
        values["kv_elements_per_token"] = 2.0 * layers * model.num_key_value_heads * model.head_dim_
        prompt, output = job.prompt_len, job.seq_len - job.prompt_len
        values["kv_read_fraction"] = (prompt + 0.5 * output) / job.seq_len
        values["prompt_per_output_token"] = prompt / output
        values["prefill_attention_s_per_token"] = values["attention_s_per_token"] * prompt / job.seq_len
        values["logit_bytes_per_token"] = model.vocab_size * LOGIT_BYTES
        values["effective_bandwidth_bytes_s"] = (
            values["memory_bandwidth_bytes_s"] * MEMORY_BANDWIDTH_UTILISATION
        )
        moe = model.num_experts > 1
        values["log_expert_miss"] = (
            float(np.log1p(-model.experts_per_token / model.num_experts)) if moe else 0.0
        )
        values.update(_precision_map_tables(KINDS.index(job.kind), stored, gemm, values))
        for name, value in values.items():
            rows[name].append(value)
    return JobTable(**{name: np.array(values) for name, values in rows.items()})


def format_unsupported(gpu_supports, trains_weights, precision):
    """Whether a module group in format ``precision`` (a code) cannot run: a format the GPU lacks
    (``gpu_supports``: whether the GPU runs that format), or a weight-only integer format for weights being
    trained (``trains_weights``: full training). Element-wise over arrays; the one rule the job table and
    the distance measures (``distances.py``) share."""
    return ~gpu_supports | (trains_weights & (precision >= INT8))


HALF_A_GROUPS = (EMBEDDING, ATTENTION, MLP)
HALF_B_GROUPS = (NORM, LM_HEAD)
HALF_A_MAPS = np.array(list(itertools.product(range(len(PRECISIONS)), repeat=3)))  # (216, 3)
HALF_B_MAPS = np.array(list(itertools.product(range(len(PRECISIONS)), repeat=2)))  # (36, 2)


def _precision_map_tables(kind: int, stored: np.ndarray, gemm: np.ndarray, values: dict) -> dict:
    """Aggregates of every half precision map for one job (see the JobTable field comments)."""
    out = {}
    error = np.nan_to_num(QUALITY_ERROR[kind])
    trains_integer = kind == TRAIN_KIND
    for half, groups, maps in (("a", HALF_A_GROUPS, HALF_A_MAPS), ("b", HALF_B_GROUPS, HALF_B_MAPS)):
        columns = [maps[:, k] for k in range(len(groups))]

        def total(per_group, columns=columns, groups=groups):
            result = per_group(groups[0], columns[0])
            for group, codes in zip(groups[1:], columns[1:], strict=True):
                result = result + per_group(group, codes)
            return result

        out[f"{half}_weight_bytes"] = total(lambda g, p: stored[g] * BYTES_PER_PARAM[p])
        out[f"{half}_gemm_s_per_flop"] = total(lambda g, p: gemm[g] / values["effective_flops"][p])
        out[f"{half}_quality_loss"] = total(lambda g, p: values["quality_weight"][g] * error[p])
        out[f"{half}_fp8_params"] = total(lambda g, p: stored[g] * (p == FP8))
        out[f"{half}_unsupported"] = total(
            lambda g, p: format_unsupported(values["supported"][p], trains_integer, p)
        ).astype(bool)
        out[f"{half}_unstable"] = total(lambda g, p: UNSTABLE_FORMAT[kind, g, p]).astype(bool)
    streamed = STREAMED_BYTES_PER_PARAM
    out["a_streamed_bytes"] = stored[ATTENTION] * streamed[HALF_A_MAPS[:, 1]]
    out["a_mlp_bytes"] = stored[MLP] * streamed[HALF_A_MAPS[:, 2]]
    norm, head = HALF_B_MAPS[:, 0], HALF_B_MAPS[:, 1]
    out["b_streamed_bytes"] = stored[NORM] * streamed[norm] + gemm[LM_HEAD] * streamed[head]
    return out
