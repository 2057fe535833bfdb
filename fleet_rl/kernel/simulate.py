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
  Megatron TP all-reduces; micro-steps per optimizer step = ceil(batch ÷ (DP·micro-batch)); the
  data-parallel collectives of the plan's ``sharding`` (none: one gradient all-reduce per step; optimizer:
  a reduce-scatter per micro-step and an all-gather per step; full: two all-gathers and a reduce-scatter
  per micro-step, per layer). Decode: one token per sequence per step, max(FLOPs ÷ compute roof,
  (streamed weights ÷ their format's stream efficiency + KV) ÷ (bandwidth·MBU)) + a fixed cost per layer
  + TP all-reduces; MoE streams only the experts a step touches; with a ``prompt_len``, each step also
  prefills the requests that replace finished ones (compute-bound).
- Memory with sharding: model states whole (none), 14 of 16 B/param sharded over the replicas (optimizer),
  or all of them plus the frozen base, with two layers' weights gathered (full).
- Power per GPU: idle + (TDP − idle) · max(tensor-core share of the step, MEMORY_POWER_SHARE · memory-
  streaming share), so memory-bound decode draws a fraction of TDP.
- A job with a ``min_tokens_per_s`` that a row misses is ``too_slow``: no power (it is not worth running),
  its would-be tokens/s kept for the reason text; the lowest-precedence status. A job with a floor that
  does not run at it (too slow, crashed, idle) is worth − FLOOR_MISS_PENALTY × its priority: a missed SLO.

Simplifications, openly: one node (no inter-node links); no pipeline, context or sequence parallelism;
every sequence holds a full ``seq_len`` KV cache (the memory a scheduler must reserve) and a step reads and
attends over its mean context (prompt + half the output); prefill activations are not held in memory
(chunked prefill); full recomputation only (no selective recomputation); the MFU curve, the per-layer
decode cost, the stream and FP8 efficiencies and quality-loss figures are fits to published numbers
(``fleet_rl/calibration.py``), not measurements of these jobs; communication is never overlapped with
compute (FSDP's prefetching is not modelled); power is linear in the binding resource's share.
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
    BF16,
    BYTES_PER_PARAM,
    CHECKPOINT_BYTES_PER_LAYER,
    CUDA_CONTEXT_BYTES,
    DECODE_COMPUTE_EFFICIENCY,
    DECODE_LAYER_OVERHEAD_S,
    ENERGY_PENALTY,
    FLOOR_MISS_PENALTY,
    FP8_WEIGHT_CACHE_BYTES_PER_PARAM,
    GATHERED_LAYERS,
    GRADIENT_COMM_BYTES,
    INVALID,
    KV_BYTES_PER_ELEMENT,
    KV_QUALITY_ERROR,
    LORA_FLOPS_PER_PARAM,
    MEMORY_POWER_SHARE,
    MFU_HALF_TOKENS,
    MFU_MAX,
    NO_SHARDING,
    OK,
    OOM,
    QUALITY_PENALTY,
    RECOMPUTE_FLOPS_PER_PARAM,
    SERVE,
    SHARD_OPTIMIZER,
    SHARDED_BYTES_PER_PARAM,
    TOO_SLOW,
    TRAIN,
    TRAIN_FLOPS_PER_PARAM,
    UNALLOCATED,
    UNSTABLE,
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
    sharding: np.ndarray  # int, index into plan_schema.SHARDINGS (none, optimizer, full)
    invalid: np.ndarray  # bool: structurally inconsistent with the scenario (set by the encoder)

    @property
    def num_rows(self) -> int:
        return int(self.job.shape[0])

    def slice(self, start: int, stop: int) -> PlanRows:
        """Rows ``start:stop`` as views (no copy)."""
        return PlanRows(*(getattr(self, name)[start:stop] for name in PlanRows.__dataclass_fields__))


@dataclass(frozen=True)
class RowResults:
    """What the kernel says about each row. Shape (R,)."""

    status: np.ndarray  # int, index into STATUSES
    memory_per_gpu_bytes: np.ndarray
    tokens_per_s: np.ndarray  # 0 unless status is ok or too_slow (what it would make: the reason says)
    # what the row's physics gives whatever its status: tokens/s as if it ran (nan where a format is
    # unsupported; unplaced and invalid rows included, meaningless there). The rewards' breadcrumbs read it
    # to tell how far under its floor a job that fails for another reason would be (``distances.py``).
    modelled_tokens_per_s: np.ndarray
    quality_loss: np.ndarray  # fractional
    power_w: np.ndarray  # all GPUs of the job; 0 unless ok
    # how many of {unsupported format, over memory, unstable numerics, under its throughput floor} hold
    # for a placed, valid row (0 for rows that run, are unplaced or invalid). ``status`` names one fault;
    # this counts them all, so that a second fault can never hide the first (the rewards' partial credit
    # reads this, not the status).
    faults: np.ndarray  # int8


def _ring_all_reduce_s(message_bytes, ranks, link_bytes_s, latency_s):
    """Ring all-reduce time: latency + 2·(n−1)/n · bytes ÷ per-direction link bandwidth; 0 for one rank."""
    return np.where(ranks > 1, latency_s + 2.0 * (ranks - 1) / ranks * message_bytes / link_bytes_s, 0.0)


CHUNK_ROWS = 8192  # rows per vectorised pass: keeps the temporaries in cache (measured fastest here)


def simulate(table: JobTable, rows: PlanRows) -> RowResults:
    """Memory, status, throughput, quality and power of every row (see the module docstring).

    Large batches run in chunks of ``CHUNK_ROWS``; every operation is element-wise per row, so a row's
    result is bit-identical whatever batch or chunk it is in."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if rows.num_rows <= CHUNK_ROWS:
            return _simulate(table, rows)
        parts = [
            _simulate(table, rows.slice(start, start + CHUNK_ROWS))
            for start in range(0, rows.num_rows, CHUNK_ROWS)
        ]
    return RowResults(
        *(np.concatenate(arrays) for arrays in zip(*(astuple_shallow(p) for p in parts), strict=True))
    )


def astuple_shallow(results: RowResults) -> tuple:
    """The fields of a ``RowResults`` in order, without copying (``dataclasses.astuple`` deep-copies)."""
    return tuple(getattr(results, name) for name in RowResults.__dataclass_fields__)


_NUM_FORMATS = len(KV_BYTES_PER_ELEMENT)


def _simulate(table: JobTable, rows: PlanRows) -> RowResults:
    j = rows.job
    num_rows = rows.num_rows
    kind = table.kind[j]
    is_serve = kind == SERVE
    # precision maps as two half codes (see JobTable): every precision-dependent sum is two 1-D lookups
    precision = rows.precision
    half_a = j * 216 + (precision[:, 0] * 36 + precision[:, 1] * 6 + precision[:, 2])
    half_b = j * 36 + (precision[:, 3] * 6 + precision[:, 4])

    # --- support and numerics (all rows) ------------------------------------------------------------------
    unsupported = table.a_unsupported.ravel()[half_a] | table.b_unsupported.ravel()[half_b]
    unsupported |= is_serve & ~table.supported.ravel()[j * _NUM_FORMATS + rows.kv_cache]
    unsupported |= (table.num_heads[j] % rows.tensor_parallel) != 0  # TP splits attention heads
    unsupported |= is_serve & (rows.sharding != NO_SHARDING)  # serving has no optimizer states to shard
    quality_loss = table.a_quality_loss.ravel()[half_a] + table.b_quality_loss.ravel()[half_b]
    quality_loss = quality_loss + np.where(is_serve, KV_QUALITY_ERROR[rows.kv_cache], 0.0)
    unstable = table.a_unstable.ravel()[half_a] | table.b_unstable.ravel()[half_b]
    unstable |= quality_loss > table.max_quality_loss[j]
    weight_bytes = table.a_weight_bytes.ravel()[half_a] + table.b_weight_bytes.ravel()[half_b]
    seconds_per_gemm_flop = table.a_gemm_s_per_flop.ravel()[half_a] + table.b_gemm_s_per_flop.ravel()[half_b]

    memory = np.empty(num_rows)
    tokens_per_s = np.empty(num_rows)
    activity = np.empty(num_rows)
    serve_rows = np.flatnonzero(is_serve)
    train_rows = np.flatnonzero(~is_serve)
    for subset, branch in ((train_rows, _training), (serve_rows, _decode)):
        if subset.size:
            out = branch(
                table,
                rows,
                subset,
                weight_bytes[subset],
                seconds_per_gemm_flop[subset],
                half_a[subset],
                half_b[subset],
            )
            memory[subset], tokens_per_s[subset], activity[subset] = out
    memory += CUDA_CONTEXT_BYTES
    oom = memory > table.memory_capacity_bytes[j]

    # --- status, power -----------------------------------------------------------------------------------
    # a job that runs below its floor: the lowest precedence, so a real fault is always named first
    too_slow = tokens_per_s < table.min_tokens_per_s[j]
    status = np.full(num_rows, OK, dtype=np.int8)
    status[too_slow] = TOO_SLOW
    status[unstable] = UNSTABLE
    status[oom] = OOM
    status[unsupported] = UNSUPPORTED
    status[rows.gpus == 0] = UNALLOCATED
    status[rows.invalid] = INVALID
    ok = status == OK
    placed = (rows.gpus > 0) & ~rows.invalid
    faults = np.where(placed, unsupported.astype(np.int8) + oom + unstable + too_slow, 0).astype(np.int8)
    idle_w, tdp_w = table.idle_w[j], table.tdp_w[j]
    power_w = rows.gpus * (idle_w + (tdp_w - idle_w) * activity)
    return RowResults(
        status=status,
        memory_per_gpu_bytes=np.where(rows.gpus > 0, memory, 0.0),
        tokens_per_s=np.where(ok | (status == TOO_SLOW), tokens_per_s, 0.0),
        modelled_tokens_per_s=tokens_per_s,
        quality_loss=quality_loss,
        power_w=np.where(ok, power_w, 0.0),
        faults=faults,
    )


def _training(table, rows, subset, weight_bytes, seconds_per_gemm_flop, half_a, half_b):
    """train and lora rows: memory per GPU, tokens/s, power activity (``_activity``) of an optimizer step."""
    j = rows.job[subset]
    is_train = table.kind[j] == TRAIN
    tp = rows.tensor_parallel[subset].astype(np.float64)
    dp = np.maximum(np.floor(rows.gpus[subset] / tp), 1.0)
    checkpointing = rows.activation_checkpointing[subset]
    seq, batch = table.seq_len[j], table.batch_size[j]
    layers, hidden = table.num_layers[j], table.hidden_size[j]
    link, latency = table.link_bytes_s[j], table.link_latency_s[j]
    stored_params = table.params_total[j]
    lora_params = table.lora_params[j]
    sharding = rows.sharding[subset]
    # memory: model states, whole (kept) or sharded over the dp replicas (see SHARDED_BYTES_PER_PARAM)
    fp8_params = table.a_fp8_params.ravel()[half_a] + table.b_fp8_params.ravel()[half_b]
    trained_params = table.trained_params[j]
    held_bytes = np.where(  # what a replica holds besides the trained weights' shardable states
        is_train,
        (ADAM_BYTES_PER_PARAM - SHARDED_BYTES_PER_PARAM) * stored_params
        + FP8_WEIGHT_CACHE_BYTES_PER_PARAM * fp8_params,
        weight_bytes + (ADAM_BYTES_PER_PARAM - SHARDED_BYTES_PER_PARAM) * lora_params,
    )
    shardable_bytes = SHARDED_BYTES_PER_PARAM * trained_params
    states_bytes = held_bytes + shardable_bytes
    # rows that shard over more than one replica (one replica has nothing to shard): few in a batch, so
    # their memory and communication are computed on that subset
    sharded = np.flatnonzero(sharding)
    sharded = sharded[dp[sharded] > 1]
    if sharded.size:
        d = dp[sharded]
        full = sharding[sharded] != SHARD_OPTIMIZER
        # the weights "full" sharding all-gathers: bf16 copies of trained weights, a frozen base as stored
        gathered_bytes = np.where(
            is_train[sharded], BYTES_PER_PARAM[BF16] * stored_params[sharded], weight_bytes[sharded]
        )
        states_bytes[sharded] = np.where(
            full,
            states_bytes[sharded] / d + GATHERED_LAYERS * gathered_bytes / layers[sharded],
            held_bytes[sharded] + shardable_bytes[sharded] / d,
        )
    micro_batch = np.minimum(rows.micro_batch_size[subset], np.ceil(batch / dp))
    micro_tokens = micro_batch * seq
    layer_working_set = micro_tokens * hidden * (ACTIVATION_BYTES_REPLICATED + ACTIVATION_BYTES_SHARDED / tp)
    activation_bytes = np.where(
        checkpointing,
        layers * CHECKPOINT_BYTES_PER_LAYER * micro_tokens * hidden + layer_working_set,
        layers * layer_working_set,
    )
    memory = states_bytes / tp + activation_bytes + micro_tokens * table.logit_bytes_per_token[j] / tp
    # time per micro-step: roofline + tensor-parallel all-reduces
    flops_per_param = np.where(is_train, TRAIN_FLOPS_PER_PARAM, LORA_FLOPS_PER_PARAM)
    flops_per_param = flops_per_param + checkpointing * RECOMPUTE_FLOPS_PER_PARAM
    # causal attention core: 2·s·d FLOPs per token per layer forward, 3× with the backward (+1× recompute)
    attention_s_per_token = (3.0 + checkpointing) * table.attention_s_per_token[j]
    adapter_s_per_token = table.adapter_s_per_token[j]
    mfu = MFU_MAX * micro_tokens / (micro_tokens + MFU_HALF_TOKENS)
    per_token_s = flops_per_param * seconds_per_gemm_flop + attention_s_per_token + adapter_s_per_token
    compute_s = micro_tokens * per_token_s / (tp * mfu)
    weight_reads = 2.0 + checkpointing  # forward, backward, recomputed forward
    memory_s = weight_reads * weight_bytes / tp / table.effective_bandwidth_bytes_s[j]
    busy_s = np.maximum(compute_s, memory_s)
    all_reduces = ALL_REDUCES_PER_LAYER_TRAIN + checkpointing * ALL_REDUCES_PER_LAYER_RECOMPUTE
    tp_message = micro_tokens * hidden * ACTIVATION_COMM_BYTES
    tp_s = all_reduces * layers * _ring_all_reduce_s(tp_message, tp, link, latency)
    # optimizer step: micro-steps of every DP replica and the data-parallel collectives
    micro_steps = np.ceil(batch / (dp * micro_batch))
    gradient_bytes = trained_params * GRADIENT_COMM_BYTES / tp
    ring_s = (dp - 1.0) / dp / link  # ring collectives move (d−1)/d of their message per link
    gradient_sync_s = np.where(dp > 1, 2.0 * gradient_bytes * ring_s + latency, 0.0)  # one all-reduce
    if sharded.size:
        gradient_sync_s[sharded] = _sharded_data_parallel_s(
            sharding[sharded] != SHARD_OPTIMIZER,
            micro_steps[sharded],
            gradient_bytes[sharded] * ring_s[sharded],
            gathered_bytes / tp[sharded] * ring_s[sharded],
            layers[sharded] * latency[sharded],
        )
    step_s = micro_steps * (busy_s + tp_s) + gradient_sync_s
    return memory, batch * seq / step_s, _activity(micro_steps * compute_s, micro_steps * memory_s, step_s)


def _sharded_data_parallel_s(full, micro_steps, gradient_s, gathered_s, per_layer_latency_s):
    """Seconds of sharded data-parallel communication per optimizer step (see the constants' comment), from
    the time to move the gradients and the gathered weights once and one latency per layer: "optimizer"
    reduce-scatters every micro-step and all-gathers once; "full" all-gathers twice and reduce-scatters
    every micro-step."""
    optimizer = (micro_steps + 1.0) * (gradient_s + per_layer_latency_s)
    full_s = micro_steps * (2.0 * gathered_s + gradient_s + 3.0 * per_layer_latency_s)
    return np.where(full, full_s, optimizer)


def _decode(table, rows, subset, weight_bytes, seconds_per_gemm_flop, half_a, half_b):
    """serve rows: memory per GPU, generated tokens/s, power activity (``_activity``) of a decode step.

    The embedding is a lookup: stored, never streamed or multiplied."""
    j = rows.job[subset]
    tp = rows.tensor_parallel[subset].astype(np.float64)
    dp = np.maximum(np.floor(rows.gpus[subset] / tp), 1.0)
    seq, batch = table.seq_len[j], table.batch_size[j]
    layers, hidden = table.num_layers[j], table.hidden_size[j]
    per_replica_batch = np.ceil(batch / dp)
    kv_shards = np.minimum(tp, table.num_kv_heads[j])
    kv_bytes_per_token = table.kv_elements_per_token[j] * KV_BYTES_PER_ELEMENT[rows.kv_cache[subset]]
    kv_cache_bytes = per_replica_batch * seq * kv_bytes_per_token / kv_shards
    decode_activation_bytes = per_replica_batch * (4.0 * hidden + table.logit_bytes_per_token[j] / tp)
    memory = weight_bytes / tp + kv_cache_bytes + decode_activation_bytes
    # MoE: a step touches each expert with probability 1 − (1 − k/E)^batch (dense: 1)
    touched_experts = np.ones(subset.size)
    moe = np.flatnonzero(table.num_experts[j] > 1)
    if moe.size:
        touched_experts[moe] = -np.expm1(per_replica_batch[moe] * table.log_expert_miss[j[moe]])
    streamed_bytes = (
        table.a_streamed_bytes.ravel()[half_a]
        + table.a_mlp_bytes.ravel()[half_a] * touched_experts
        + table.b_streamed_bytes.ravel()[half_b]
    )
    # the KV a step reads: each sequence's current context, on average its prompt and half its output
    kv_read_bytes = kv_cache_bytes * table.kv_read_fraction[j]
    memory_s = (streamed_bytes / tp + kv_read_bytes) / table.effective_bandwidth_bytes_s[j]
    # decode attention over the mean context c: 4·c·d FLOPs per token per layer; the causal forward's
    # attention_s_per_token is 2·s·d, so 2 × it × c/s
    flops_s = 2.0 * seconds_per_gemm_flop + 2.0 * table.attention_s_per_token[j] * table.kv_read_fraction[j]
    compute_s = per_replica_batch * flops_s / (tp * DECODE_COMPUTE_EFFICIENCY)
    busy_s = np.maximum(memory_s, compute_s)
    message = per_replica_batch * hidden * ACTIVATION_COMM_BYTES
    tp_s = (
        ALL_REDUCES_PER_LAYER_DECODE
        * layers
        * _ring_all_reduce_s(message, tp, table.link_bytes_s[j], table.link_latency_s[j])
    )
    # prefill (continuous batching): every step also prefills the requests that replace the finished ones,
    # per_replica_batch ÷ generated tokens per request of them, each prompt_len tokens of compute-bound
    # forward pass (GEMMs at the format's speed, causal attention over half the prompt on average)
    prefill_token_s = (2.0 * seconds_per_gemm_flop + table.prefill_attention_s_per_token[j]) / (
        tp * DECODE_COMPUTE_EFFICIENCY
    )
    prefill_s = per_replica_batch * table.prompt_per_output_token[j] * prefill_token_s
    step_s = busy_s + prefill_s + layers * DECODE_LAYER_OVERHEAD_S + tp_s
    return memory, batch / step_s, _activity(compute_s + prefill_s, memory_s, step_s)


def _activity(compute_s, memory_s, step_s):
    """The fraction of the dynamic power range a GPU draws: its tensor-core time, or its memory-streaming
    time weighted by ``MEMORY_POWER_SHARE``, whichever binds, over the step (communication waits and fixed
    per-layer gaps draw idle power)."""
    return np.minimum(np.maximum(compute_s, MEMORY_POWER_SHARE * memory_s) / step_s, 1.0)


def job_values(table: JobTable, rows: PlanRows, results: RowResults, reference_tokens_per_s: np.ndarray):
    """Each row's contribution to the cluster objective: for an ``ok`` row

    value = priority · (tokens/s ÷ reference)^UTILITY_EXPONENT · max(0, 1 − QUALITY_PENALTY · quality)
            − ENERGY_PENALTY · power ÷ cluster TDP,
    where the reference is the best tokens/s the job reaches alone on the cluster; any other row (idle,
    crashed, too slow) is worth ``missed_floor_value``: 0, or − FLOOR_MISS_PENALTY · priority for a job
    with a ``min_tokens_per_s`` (a missed SLO costs).
    """
    j = rows.job
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput_share = np.power(results.tokens_per_s / reference_tokens_per_s[j], UTILITY_EXPONENT)
        quality_factor = np.maximum(0.0, 1.0 - QUALITY_PENALTY * results.quality_loss)
        value = table.priority[j] * throughput_share * quality_factor
        value = value - ENERGY_PENALTY * results.power_w / table.cluster_tdp_w[j]
    return np.where(results.status == OK, value, missed_floor_value(table)[j])


def missed_floor_value(table: JobTable) -> np.ndarray:
    """(J,) each job's value when it does not run at its floor (too slow, crashed or idle):
    − FLOOR_MISS_PENALTY · priority for a job with a ``min_tokens_per_s``; 0 (its idle value) without."""
    return np.where(table.min_tokens_per_s > 0, -FLOOR_MISS_PENALTY * table.priority, 0.0)
