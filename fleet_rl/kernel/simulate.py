"""The physics: per-job memory, numerics, throughput and power of a batch of plan rows, all vectorised.

One row is one job's part of one plan (``PlanRows``, shape ``(R,)``); ``JobTable`` holds the constants of
the job it belongs to. ``simulate`` is pure: no I/O, no RNG, no Python loop over rows; the single-plan
``evaluate``, the batched path and the exact solver all call it, so they cannot disagree.

Model (DESIGN.md §4; constants and sources in ``constants.py``):
- Memory per GPU. train: 16 B/param AdamW states (+1 B/param fp8 weight cache) ÷ TP; lora: frozen base at
  its formats ÷ TP + adapters at 16 B/param; both add activations (Korthikanti et al. with FlashAttention,
  or 2·s·b·h per layer with full recomputation), fp32 logits and the CUDA context. serve: weights ÷ TP +
  KV cache (2·layers·kv_dim·seq·batch·bytes, sharded over min(TP, kv heads)) + logits + context.
- Throughput. Training: a roofline per micro-batch, max(FLOPs ÷ (peak·MFU), weight bytes ÷ bandwidth) plus
  Megatron TP all-reduces; micro-steps per optimizer step = ceil(batch ÷ (DP·micro-batch)); one gradient
  all-reduce over DP per step. Decode: one token per sequence per step, max(FLOPs ÷ compute roof, (streamed
  weights + KV) ÷ (bandwidth·MBU)) + TP all-reduces; MoE streams only the experts a step touches.
- Power per GPU: idle + (TDP − idle) · busy fraction (time not spent waiting on communication) ≤ TDP.

Simplifications, openly: one node (no inter-node links); no ZeRO/FSDP sharding of optimizer states; no
pipeline parallelism; no prefill cost in serving and every sequence at full ``seq_len`` context; the MFU
curve and quality-loss figures are smooth fits to published numbers, not measurements of these jobs;
communication is never overlapped with compute; power is linear in the busy fraction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fleet_rl.kernel.constants import (
    ACTIVATION_BYTES_REPLICATED,
    ACTIVATION_BYTES_SHARDED,
    ACTIVATION_COMM_BYTES,
    ADAM_BYTES_PER_PARAM,
    ALL_REDUCES_PER_LAYER_DECODE,
    ALL_REDUCES_PER_LAYER_RECOMPUTE,
    ALL_REDUCES_PER_LAYER_TRAIN,
    ATTENTION,
    BYTES_PER_PARAM,
    CHECKPOINT_BYTES_PER_LAYER,
    CUDA_CONTEXT_BYTES,
    DECODE_COMPUTE_EFFICIENCY,
    ENERGY_PENALTY,
    FP8,
    FP8_WEIGHT_CACHE_BYTES_PER_PARAM,
    GRADIENT_COMM_BYTES,
    INT8,
    INVALID,
    KV_BYTES_PER_ELEMENT,
    KV_QUALITY_ERROR,
    LM_HEAD,
    LOGIT_BYTES,
    LORA,
    LORA_FLOPS_PER_PARAM,
    MEMORY_BANDWIDTH_UTILISATION,
    MFU_HALF_TOKENS,
    MFU_MAX,
    MLP,
    NORM,
    OK,
    OOM,
    QUALITY_ERROR,
    QUALITY_PENALTY,
    RECOMPUTE_FLOPS_PER_PARAM,
    SERVE,
    TRAIN,
    TRAIN_FLOPS_PER_PARAM,
    UNALLOCATED,
    UNSTABLE,
    UNSTABLE_FORMAT,
    UNSUPPORTED,
    UTILITY_EXPONENT,
)
from fleet_rl.kernel.job_table import JobTable


@dataclass(frozen=True)
class PlanRows:
    """One row per (plan, job). Structure of arrays, shape (R,) unless noted."""

    job: np.ndarray  # int, index into the JobTable
    gpus: np.ndarray  # int
    tensor_parallel: np.ndarray  # int in {1, 2, 4, 8}
    precision: np.ndarray  # (R, 5) int precision codes per module group
    micro_batch_size: np.ndarray  # int
    activation_checkpointing: np.ndarray  # bool
    kv_cache: np.ndarray  # int precision code
    invalid: np.ndarray  # bool: structurally inconsistent with the scenario (set by the encoder)

    @property
    def num_rows(self) -> int:
        return int(self.job.shape[0])


@dataclass(frozen=True)
class RowResults:
    """What the kernel says about each row. Shape (R,)."""

    status: np.ndarray  # int, index into STATUSES
    memory_per_gpu_bytes: np.ndarray
    tokens_per_s: np.ndarray  # 0 unless status is ok
    quality_loss: np.ndarray  # fractional
    power_w: np.ndarray  # all GPUs of the job; 0 unless ok
    busy_time_s: np.ndarray  # compute/memory time per step (the precision-dependent part of a step)


def _sum_groups(per_group: np.ndarray) -> np.ndarray:
    """Sum over the 5 module groups in a fixed order, so a row's result never depends on the batch."""
    return per_group[:, 0] + per_group[:, 1] + per_group[:, 2] + per_group[:, 3] + per_group[:, 4]


def _ring_all_reduce_s(message_bytes, ranks, link_bytes_s, latency_s):
    """Ring all-reduce time: latency + 2·(n−1)/n · bytes ÷ per-direction link bandwidth; 0 for one rank."""
    return np.where(ranks > 1, latency_s + 2.0 * (ranks - 1) / ranks * message_bytes / link_bytes_s, 0.0)


def simulate(table: JobTable, rows: PlanRows) -> RowResults:
    """Memory, status, throughput, quality and power of every row (see the module docstring)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return _simulate(table, rows)


def _simulate(table: JobTable, rows: PlanRows) -> RowResults:
    j = rows.job
    kind = table.kind[j]
    is_train, is_lora, is_serve = kind == TRAIN, kind == LORA, kind == SERVE
    gpus = rows.gpus.astype(np.float64)
    tp = rows.tensor_parallel.astype(np.float64)
    dp = np.maximum(np.floor(gpus / tp), 1.0)
    precision = rows.precision
    kv = rows.kv_cache
    checkpointing = rows.activation_checkpointing
    seq = table.seq_len[j]
    batch = table.batch_size[j]
    layers = table.num_layers[j]
    hidden = table.hidden_size[j]
    vocab = table.vocab_size[j]
    stored = table.params_stored[j]  # (R, 5)
    gemm = table.params_gemm[j]  # (R, 5)
    link = table.link_bytes_s[j]
    latency = table.link_latency_s[j]
    bandwidth = table.memory_bandwidth_bytes_s[j] * MEMORY_BANDWIDTH_UTILISATION

    # --- support and numerics -------------------------------------------------------------------------
    row_index = j[:, None]
    gpu_lacks_format = ~table.supported[row_index, precision].all(axis=1)
    kv_unsupported = is_serve & ~table.supported[j, kv]
    trains_integer_weights = is_train & (precision >= INT8).any(axis=1)
    unsupported = gpu_lacks_format | kv_unsupported | trains_integer_weights
    unsupported |= (table.num_heads[j] % rows.tensor_parallel) != 0  # TP splits attention heads
    group = np.arange(precision.shape[1])[None, :]
    unstable_format = UNSTABLE_FORMAT[kind[:, None], group, precision].any(axis=1)
    error = np.nan_to_num(QUALITY_ERROR[kind[:, None], precision])
    quality_loss = _sum_groups(table.quality_weight[j] * error) + np.where(is_serve, KV_QUALITY_ERROR[kv], 0.0)
    unstable = unstable_format | (quality_loss > table.max_quality_loss[j])

    # --- memory per GPU ---------------------------------------------------------------------------------
    weight_bytes = _sum_groups(stored * BYTES_PER_PARAM[precision])
    fp8_cache_bytes = _sum_groups(stored * (precision == FP8)) * FP8_WEIGHT_CACHE_BYTES_PER_PARAM
    lora_params = table.lora_params[j]
    states_bytes = np.where(
        is_train,
        ADAM_BYTES_PER_PARAM * _sum_groups(stored) + fp8_cache_bytes,
        weight_bytes + ADAM_BYTES_PER_PARAM * lora_params,
    )
    per_replica_batch = np.ceil(batch / dp)
    micro_batch = np.minimum(rows.micro_batch_size.astype(np.float64), per_replica_batch)
    micro_tokens = micro_batch * seq
    layer_working_set = micro_tokens * hidden * (ACTIVATION_BYTES_REPLICATED + ACTIVATION_BYTES_SHARDED / tp)
    activation_bytes = np.where(
        checkpointing,
        layers * CHECKPOINT_BYTES_PER_LAYER * micro_tokens * hidden + layer_working_set,
        layers * layer_working_set,
    )
    train_memory = states_bytes / tp + activation_bytes + micro_tokens * vocab * LOGIT_BYTES / tp

    kv_shards = np.minimum(tp, table.num_kv_heads[j])
    kv_bytes_per_token = 2.0 * layers * table.kv_dim[j] * KV_BYTES_PER_ELEMENT[kv]
    kv_cache_bytes = per_replica_batch * seq * kv_bytes_per_token / kv_shards
    decode_activation_bytes = per_replica_batch * (4.0 * hidden + vocab * LOGIT_BYTES / tp)
    serve_memory = weight_bytes / tp + kv_cache_bytes + decode_activation_bytes
    memory = np.where(is_serve, serve_memory, train_memory) + CUDA_CONTEXT_BYTES
    oom = memory > table.memory_capacity_bytes[j]

    # --- training throughput ----------------------------------------------------------------------------
    seconds_per_gemm_flop = _sum_groups(gemm / table.effective_flops[row_index, precision])  # s·param/FLOP
    flops_per_param = np.where(is_train, TRAIN_FLOPS_PER_PARAM, LORA_FLOPS_PER_PARAM)
    flops_per_param = flops_per_param + checkpointing * RECOMPUTE_FLOPS_PER_PARAM
    attention_flops = table.attention_flops[j]
    # causal attention core: 2·s·d FLOPs per token per layer forward, 3× with the backward (+1× recompute)
    attention_s_per_token = (3.0 + checkpointing) * 2.0 * layers * seq * table.attention_dim[j] / attention_flops
    adapter_s_per_token = np.where(is_lora, TRAIN_FLOPS_PER_PARAM * lora_params / attention_flops, 0.0)
    gemm_s_per_token = flops_per_param * seconds_per_gemm_flop
    mfu = MFU_MAX * micro_tokens / (micro_tokens + MFU_HALF_TOKENS)
    train_compute_s = micro_tokens * (gemm_s_per_token + attention_s_per_token + adapter_s_per_token) / (tp * mfu)
    weight_reads = 2.0 + checkpointing  # forward, backward, recomputed forward
    train_memory_s = weight_reads * weight_bytes / tp / bandwidth
    train_busy_s = np.maximum(train_compute_s, train_memory_s)
    all_reduces = ALL_REDUCES_PER_LAYER_TRAIN + checkpointing * ALL_REDUCES_PER_LAYER_RECOMPUTE
    tp_message = micro_tokens * hidden * ACTIVATION_COMM_BYTES
    train_tp_s = all_reduces * layers * _ring_all_reduce_s(tp_message, tp, link, latency)
    micro_steps = np.ceil(batch / (dp * micro_batch))
    trained_params = np.where(is_train, _sum_groups(stored), lora_params)
    gradient_sync_s = _ring_all_reduce_s(trained_params * GRADIENT_COMM_BYTES / tp, dp, link, latency)
    train_busy_step_s = micro_steps * train_busy_s
    train_step_s = train_busy_step_s + micro_steps * train_tp_s + gradient_sync_s
    train_tokens_per_s = batch * seq / train_step_s

    # --- decode throughput (the embedding is a lookup: stored, never streamed or multiplied) ----------
    bytes_per_group = stored * BYTES_PER_PARAM[precision]
    experts = table.num_experts[j]
    touched_experts = np.where(
        experts > 1, 1.0 - np.power(1.0 - table.experts_per_token[j] / experts, per_replica_batch), 1.0
    )
    streamed_bytes = (
        bytes_per_group[:, ATTENTION]
        + bytes_per_group[:, MLP] * touched_experts
        + bytes_per_group[:, NORM]
        + gemm[:, LM_HEAD] * BYTES_PER_PARAM[precision[:, LM_HEAD]]
    )
    decode_memory_s = (streamed_bytes / tp + per_replica_batch * seq * kv_bytes_per_token / kv_shards) / bandwidth
    decode_flops_s = 2.0 * seconds_per_gemm_flop + 4.0 * layers * seq * table.attention_dim[j] / attention_flops
    decode_compute_s = per_replica_batch * decode_flops_s / (tp * DECODE_COMPUTE_EFFICIENCY)
    decode_busy_s = np.maximum(decode_memory_s, decode_compute_s)
    decode_tp_s = ALL_REDUCES_PER_LAYER_DECODE * layers * _ring_all_reduce_s(
        per_replica_batch * hidden * ACTIVATION_COMM_BYTES, tp, link, latency
    )
    decode_step_s = decode_busy_s + decode_tp_s
    decode_tokens_per_s = batch / decode_step_s

    # --- status, power -----------------------------------------------------------------------------------
    status = np.full(rows.num_rows, OK, dtype=np.int8)
    status = np.where(unstable, UNSTABLE, status)
    status = np.where(oom, OOM, status)
    status = np.where(unsupported, UNSUPPORTED, status)
    status = np.where(rows.gpus == 0, UNALLOCATED, status)
    status = np.where(rows.invalid, INVALID, status).astype(np.int8)
    ok = status == OK
    tokens_per_s = np.where(ok, np.where(is_serve, decode_tokens_per_s, train_tokens_per_s), 0.0)
    busy_fraction = np.where(is_serve, decode_busy_s / decode_step_s, train_busy_step_s / train_step_s)
    idle_w, tdp_w = table.idle_w[j], table.tdp_w[j]
    power_w = np.where(ok, gpus * np.minimum(idle_w + (tdp_w - idle_w) * busy_fraction, tdp_w), 0.0)
    busy_s = np.where(is_serve, decode_busy_s, train_busy_s)
    return RowResults(
        status=status,
        memory_per_gpu_bytes=np.where(rows.gpus > 0, memory, 0.0),
        tokens_per_s=tokens_per_s,
        quality_loss=quality_loss,
        power_w=power_w,
        busy_time_s=busy_s,
    )


def job_values(table: JobTable, rows: PlanRows, results: RowResults, reference_tokens_per_s: np.ndarray):
    """Each row's contribution to the cluster objective (0 unless ok).

    value = priority · (tokens/s ÷ reference)^UTILITY_EXPONENT · max(0, 1 − QUALITY_PENALTY · quality) − ENERGY_PENALTY ·
    power ÷ cluster TDP, where the reference is the best tokens/s the job reaches alone on the cluster.
    """
    j = rows.job
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput_share = np.power(results.tokens_per_s / reference_tokens_per_s[j], UTILITY_EXPONENT)
        quality_factor = np.maximum(0.0, 1.0 - QUALITY_PENALTY * results.quality_loss)
        value = table.priority[j] * throughput_share * quality_factor
        value = value - ENERGY_PENALTY * results.power_w / table.cluster_tdp_w[j]
    return np.where(results.status == OK, value, 0.0)
