"""Modelling constants of the Agentic Kernel, each with its source or stated as a product choice.

Arrays are indexed by the integer codes of ``catalog.PRECISIONS`` (fp32, bf16, fp16, fp8, int8, int4),
``catalog.MODULE_GROUPS`` (embedding, attention, mlp, norm, lm_head) and ``KINDS`` (train, lora, serve).
"""

from __future__ import annotations

import numpy as np

from fleet_rl.catalog import MODULE_GROUPS, PRECISIONS

KINDS: tuple[str, ...] = ("train", "lora", "serve")
TRAIN, LORA, SERVE = 0, 1, 2
FP32, BF16, FP16, FP8, INT8, INT4 = (
    PRECISIONS.index(p) for p in ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
)
EMBEDDING, ATTENTION, MLP, NORM, LM_HEAD = (MODULE_GROUPS.index(g) for g in MODULE_GROUPS)

STATUSES: tuple[str, ...] = ("ok", "oom", "unsupported", "unstable", "invalid", "unallocated", "too_slow")
OK, OOM, UNSUPPORTED, UNSTABLE, INVALID, UNALLOCATED, TOO_SLOW = range(len(STATUSES))

# --- Storage -------------------------------------------------------------------------------------------
# Bytes per parameter of a stored weight. fp8: 1 byte + one fp32 scale per 128-element block (DeepSeek-V3
# tech report §3.3, block-wise scaling) = 1 + 4/128. int8: per-channel scales, negligible (LLM.int8(),
# Dettmers et al. 2022). int4: NF4 with double quantisation = 4.127 bits (QLoRA, Dettmers et al. 2023 §3).
BYTES_PER_PARAM = np.array([4.0, 2.0, 2.0, 1.0 + 4.0 / 128.0, 1.0, 4.127 / 8.0])
# KV-cache bytes per element: fp8/int8 per-tensor scale (vLLM fp8 KV cache); int4 with per-group scales
# (KIVI, Liu et al. 2024: 4-bit plus a 16-bit scale and zero per 32 elements ≈ 0.625 B).
KV_BYTES_PER_ELEMENT = np.array([4.0, 2.0, 2.0, 1.0, 1.0, 0.625])

# Mixed-precision AdamW model states: 2 (bf16 weights) + 2 (grads) + 12 (fp32 master, momentum, variance)
# = 16 bytes/param (ZeRO, Rajbhandari et al. 2020 §3.1). Pure fp32 training is 4+4+8 = 16 as well.
ADAM_BYTES_PER_PARAM = 16.0
# Data-parallel sharding (the plan's ``sharding``: none, optimizer, full; ZeRO, Rajbhandari et al. 2020).
# "optimizer" (ZeRO-2, FSDP SHARD_GRAD_OP) shards the 12 B of fp32 optimizer states and the 2 B of gradients
# over the replicas and keeps the 2 B of bf16 weights whole; "full" (ZeRO-3, FSDP FULL_SHARD) shards all 16
# and gathers the bf16 weights of one layer at a time, two in flight (the next layer is prefetched). ZeRO
# §5.1 and Fig. 1 (Ψ = 7.5 B parameters, K = 12, N_d = 64): (2 + 2 + K)Ψ = 120 GB of model states per GPU
# unsharded, (2 + (2 + K)/N_d)Ψ = 16.6 GB with P_os+g, (2 + 2 + K)Ψ/N_d = 1.9 GB with P_os+g+p
# (tests/kernel/test_sharding.py checks the kernel's memory against these).
NO_SHARDING, SHARD_OPTIMIZER, SHARD_FULL = 0, 1, 2
SHARDED_BYTES_PER_PARAM = 14.0  # gradients (2) + fp32 master, momentum, variance (12)
GATHERED_LAYERS = 2
# Sharded data parallelism's communication per optimizer step, in bytes of the trained (or frozen) weights
# moved by ring collectives at (d−1)/d of the message per link (ZeRO §7): plain data parallelism
# all-reduces the gradients once (2×: a reduce-scatter and an all-gather); "optimizer" reduce-scatters the
# gradients every micro-step (accumulation into sharded buffers) and all-gathers the updated weights once;
# "full" all-gathers the weights in the forward and again in the backward and reduce-scatters the gradients
# every micro-step (3× a micro-step: ZeRO-3's 1.5× of data parallelism, §7.2.2). Sharded collectives run
# per layer (FSDP wraps each transformer block), each paying the link latency.
# Transformer Engine keeps an fp8 copy of each fp8-GEMM weight (plus its transpose for the backward pass,
# which we fold into one byte): +1 byte/param for groups trained in fp8.
FP8_WEIGHT_CACHE_BYTES_PER_PARAM = 1.0
LORA_RANK = 16  # adapters on q,k,v,o,gate,up,down (QLoRA paper's "all linear layers"; r=16 is TRL's default)
# Activations per transformer layer with FlashAttention (the 5·a·s/h term vanishes) and tensor
# parallelism without sequence parallelism: s·b·h·(10 + 24/t) bytes (Korthikanti et al. 2022, Table 2).
# Full recomputation keeps only each layer's 2·s·b·h input, plus one layer's working set during backward.
ACTIVATION_BYTES_REPLICATED = 10.0
ACTIVATION_BYTES_SHARDED = 24.0
CHECKPOINT_BYTES_PER_LAYER = 2.0
LOGIT_BYTES = 4.0  # logits are up-cast to fp32 for the cross-entropy (HF ForCausalLM loss)
CUDA_CONTEXT_BYTES = 0.5e9  # CUDA context + cuBLAS/NCCL workspaces, ≈0.4-0.5 GB per GPU (DESIGN.md §4)

# --- Compute -------------------------------------------------------------------------------------------
# Efficiency of a GEMM in each format relative to the GPU's dense peak for that format. FP8 GEMMs do not
# reach 2× bf16 (scaling, casting and amax bookkeeping): 0.75 of the FP8 peak, fit
# [calibration: nemo2407-llama3-8b-fp8-h100] to NeMo 24.07's Llama-3-8B FP8 pre-training on 8× H100,
# 12,036 tokens/s per GPU (docs/source/performance/performance_summary.md). Checked, not fit: Megatron-Bridge
# 25.11 on H100 and B200, torchtitan's Float8/bf16 ratio (1.28×). Weight-only int8/int4 GEMMs dequantise
# to 16-bit before the matmul (bitsandbytes, Marlin at large batch) and run at 0.75 of the 16-bit peak.
FORMAT_EFFICIENCY = np.array([1.0, 1.0, 1.0, 0.75, 0.75, 0.75])
WEIGHT_ONLY = np.array([False, False, False, False, True, True])
# Training MFU rises with tokens per micro-batch: MFU = MFU_MAX · t/(t + MFU_HALF_TOKENS). MFU_MAX 0.5:
# Llama 3 reports 38-43 % BF16 MFU on H100 (Dubey et al. 2024 Table 4), MegaScale 55 %. The half-point of
# 512 tokens is a modelling choice (small GEMMs underuse tensor cores).
MFU_MAX = 0.5
MFU_HALF_TOKENS = 512.0
DECODE_COMPUTE_EFFICIENCY = 0.6  # compute roof of batched decode (vLLM/TRT-LLM large-batch decode)
# Model bandwidth utilisation of decode: 60-80 % is typical (Databricks, "LLM Inference Performance
# Engineering: Best Practices", 2023).
MEMORY_BANDWIDTH_UTILISATION = 0.8
# A fixed cost per layer per decode step: the launches and tails of the ~10 small kernels of a layer, which
# a batch-1 GEMV over a shard cannot hide (gpt-fast runs with torch.compile and CUDA graphs, and still has
# it). Fit [calibration: gptfast-llama31-8b-bf16-tp1]: gpt-fast README (pytorch-labs/gpt-fast @32971d3,
# "Benchmarks"), Llama-3.1-8B bf16 on one A100-80GB, 93.89 tok/s = 10.65 ms a token = 15.0 GB streamed ÷
# (2,039 GB/s · 0.8) + 32 layers · 45 µs. Checked, not fit: the same README's tensor-parallel rows
# (TP 2/4/8: 149.10/217.21/276.01 tok/s), Llama-3.1-70B and Mixtral rows, TensorRT-LLM's online latencies.
DECODE_LAYER_OVERHEAD_S = 45e-6
# Weight-only int8/int4 decode dequantises inside the GEMV: it streams fewer bytes but at a lower fraction
# of the memory bandwidth than a 16-bit GEMV (decode streams bytes ÷ this efficiency). Fit to gpt-fast
# (same README, A100-80GB, batch 1): int8 0.8 from Llama-3.1-8B int8, 137.64 tok/s
# [calibration: gptfast-llama31-8b-int8]; int4 0.575 from Llama-2-7B int4 g32, 196.80 tok/s against
# 104.9 bf16 (1.88×; Llama-2-7B is not in the catalog: fit by hand with its dims, 6.61 B streamed params,
# and checked on Llama-3.1-8B [calibration: awq-llama3-8b-int4-4090]). fp8 weights feed FP8 tensor cores
# directly (no dequantisation): 1.0.
WEIGHT_STREAM_EFFICIENCY = np.array([1.0, 1.0, 1.0, 1.0, 0.8, 0.575])
STREAMED_BYTES_PER_PARAM = BYTES_PER_PARAM / WEIGHT_STREAM_EFFICIENCY
# Power follows the binding resource: a GPU draws idle + (TDP − idle) · max(tensor-core share of the step,
# MEMORY_POWER_SHARE · memory-streaming share of the step). Memory-bound decode leaves the SMs stalled and
# draws a fraction of TDP: "on NVIDIA H200, decode draws only 137–300 W on a 700 W GPU" (Ma et al. 2026,
# "The Illusion of Power Capping in LLM Decode", arXiv:2605.11999, abstract). Fit
# [calibration: power-h200-decode]: 0.3 puts batch-1 to batch-64 decode of 7-8B models on an H200 inside
# that range. Compute-bound training draws up to TDP.
MEMORY_POWER_SHARE = 0.3
# FLOPs per parameter per token: forward 2, backward 4 (weights + inputs), recomputation another 2
# (Kaplan et al. 2020; Narayanan et al. 2021). A frozen base (LoRA) needs no weight gradients: 2 + 2.
TRAIN_FLOPS_PER_PARAM = 6.0
LORA_FLOPS_PER_PARAM = 4.0
RECOMPUTE_FLOPS_PER_PARAM = 2.0
# Megatron tensor parallelism: 2 all-reduces per layer in the forward, 2 in the backward, 2 more when
# the forward is recomputed (Shoeybi et al. 2019 §3); decode does 2 per layer per step.
ALL_REDUCES_PER_LAYER_TRAIN = 4.0
ALL_REDUCES_PER_LAYER_RECOMPUTE = 2.0
ALL_REDUCES_PER_LAYER_DECODE = 2.0
ACTIVATION_COMM_BYTES = 2.0  # bf16 activations in all-reduces
GRADIENT_COMM_BYTES = 2.0  # bf16 gradients in the data-parallel all-reduce (PyTorch DDP/FSDP default)

# --- Numerics ------------------------------------------------------------------------------------------
# Fractional quality loss (≈ relative perplexity increase) when a whole module group is in a format, per
# job kind (rows: train, lora, serve; columns: fp32 bf16 fp16 fp8 int8 int4).
# serve fp8 W8A8: ~0.5 % (per-tensor E4M3 on Llama-class models); int8 weight-only ≈ lossless, 0.3 %
# (LLM.int8()); int4 g128 ≈ 6.5 % on Llama-3-8B (wikitext2 ppl 6.1→6.5, Huang et al. 2024 "How good are
# low-bit quantized LLaMA3 models?"). lora: a 4-bit NF4 base with adapters recovers 16-bit LoRA quality
# (QLoRA §5), residual 1 %. train: fp8 GEMMs < 0.25 % relative loss error (DeepSeek-V3 §3.3); fp16 risks
# overflow past 65,504 and skipped steps under loss scaling (Micikevicius et al. 2018) — penalised 2 %.
# int8/int4 cannot hold trained weights: NaN marks "unsupported".
QUALITY_ERROR = np.array(
    [
        [0.0, 0.0, 0.02, 0.003, np.nan, np.nan],  # train
        [0.0, 0.0, 0.0, 0.004, 0.002, 0.01],  # lora (frozen base)
        [0.0, 0.0, 0.0, 0.005, 0.003, 0.065],  # serve
    ]
)
# KV-cache quantisation error (serving): fp8 ≈ 0.2 % (vLLM docs), int8 0.3 %, int4 ≈ 3 % (KIVI).
KV_QUALITY_ERROR = np.array([0.0, 0.0, 0.0, 0.002, 0.003, 0.03])
# Sensitivity of each module group per parameter: the output head is the most sensitive (llama.cpp
# k-quants keep output.weight at Q6_K), the embedding the least (a lookup; llama.cpp quantises token_embd
# hardest). Quality loss = Σ_groups share_of_params · sensitivity · error.
GROUP_SENSITIVITY = np.array([0.5, 1.0, 1.0, 1.0, 3.0])
# Formats that make a group numerically unstable, per kind [kind, group, precision]. FP8 embedding, norm or
# lm_head in training diverges (DeepSeek-V3 keeps them in BF16/FP32; Transformer Engine runs FP8 GEMMs
# only). Norm gains in fp8/int8/int4 wreck the residual stream's scale in any kind (no quantiser does it).
UNSTABLE_FORMAT = np.zeros((len(KINDS), len(MODULE_GROUPS), len(PRECISIONS)), dtype=bool)
UNSTABLE_FORMAT[TRAIN, [EMBEDDING, NORM, LM_HEAD], FP8] = True
UNSTABLE_FORMAT[:, NORM, [FP8, INT8, INT4]] = True

# --- Objective (product choices, not physics) ----------------------------------------------------------
# A job's value = priority · (tokens/s ÷ the best tokens/s it reaches alone on the cluster)^UTILITY_EXPONENT
#                 · max(0, 1 − QUALITY_PENALTY · quality_loss) − ENERGY_PENALTY · power_w / cluster TDP.
# The exponent < 1 gives diminishing returns (α-fair utility with α = 0.25, Mo & Walrand 2000): at 1,
# throughput that grows nearly linearly with GPUs makes "every GPU to the top-priority job" close to optimal
# (that template reaches 54 % of the optimum on hard, benchmarks/reward/templates.py). At 0.5 it forgave too
# much: a plan at a quarter of a job's best speed still earned half its value, and fixed per-kind settings
# that never read the scenario reached 77/63/61 % on easy/medium/hard; at 0.75, 71/57/52 %.
UTILITY_EXPONENT = 0.75
# A job with a min_tokens_per_s (a serving SLO, a training deadline) that does not run at its floor (too
# slow, crashed, or left idle) costs its priority: a missed service-level objective is a loss (SLA credits,
# a blown deadline), not merely a job that earns nothing. When a floor only cost the job's own value,
# "every GPU to the top-priority job" lost nothing by idling the others, and stayed near half the optimum
# on medium and hard whatever the floors; the reward already ranked that plan not feasible.
# An optimum can still idle a floor job whose floor no plan reaches: every plan then pays the penalty.
FLOOR_MISS_PENALTY = 1.0  # × the job's priority
QUALITY_PENALTY = 4.0  # a 1 % quality loss costs 4 % of the job's value
ENERGY_PENALTY = 0.05  # a tie-breaker: GPUs that add no throughput are not worth their power
