"""The physics the kernel must get right, with hand-computed expectations."""

from __future__ import annotations

import pytest
from conftest import ALL_BF16, job_plan, one_job

from fleet_rl.catalog import GPUS, MODELS
from fleet_rl.kernel import evaluate

INT4_GEMMS = {"embedding": "bf16", "attention": "int4", "mlp": "int4", "norm": "bf16", "lm_head": "bf16"}


def test_llama70b_bf16_serving_on_one_h100_is_oom_but_fits_with_int4_gemms():
    scenario = one_job("h100-sxm", "llama-3.1-70b", "serve", seq_len=4096, batch_size=1)
    bf16 = evaluate(scenario, job_plan()).jobs[0]
    assert bf16.status == "oom"
    assert bf16.memory_per_gpu_gb > 140  # 70.55 B params × 2 bytes = 141 GB of weights alone
    int4 = evaluate(scenario, job_plan(precision=INT4_GEMMS)).jobs[0]
    assert int4.status == "ok"
    assert int4.memory_per_gpu_gb < 60


def test_full_adamw_training_of_llama8b_on_one_80gb_gpu_is_oom():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "train", seq_len=1024, batch_size=1)
    result = evaluate(scenario, job_plan(micro_batch_size=1, activation_checkpointing=True)).jobs[0]
    assert result.status == "oom"
    # 16 B/param × 8.030 B = 128.5 GB states; + 32 layers × 2·s·h + one layer's 34·s·h working set
    # (0.27 + 0.14 GB) + fp32 logits 1024 × 128256 × 4 B (0.53 GB) + 0.5 GB context ≈ 129.9 GB
    assert result.memory_per_gpu_gb == pytest.approx(129.9, rel=0.01)


def test_fp8_on_a100_is_unsupported():
    scenario = one_job("a100-80gb", "llama-3.1-8b", "serve", seq_len=1024)
    fp8 = dict(ALL_BF16, attention="fp8", mlp="fp8")
    result = evaluate(scenario, job_plan(precision=fp8))
    assert result.jobs[0].status == "unsupported"
    assert any(reason.startswith("unsupported:") and "fp8" in reason for reason in result.reasons)


def test_bf16_on_t4_is_unsupported_but_fp16_runs():
    scenario = one_job("t4", "gpt2", "serve", seq_len=1024, batch_size=4)
    assert evaluate(scenario, job_plan()).jobs[0].status == "unsupported"
    fp16 = dict.fromkeys(ALL_BF16, "fp16")
    assert evaluate(scenario, job_plan(precision=fp16, kv_cache="fp16")).jobs[0].status == "ok"
    # without a kv_cache key the KV cache takes the GPU's 16-bit format (fp16 on a T4)
    assert evaluate(scenario, job_plan(precision=fp16)).jobs[0].status == "ok"


@pytest.mark.parametrize("group", ["embedding", "norm", "lm_head"])
def test_fp8_outside_gemms_in_training_is_unstable(group):
    scenario = one_job("h100-sxm", "gpt2", "train", seq_len=1024, batch_size=8)
    ok = evaluate(scenario, job_plan(precision=dict(ALL_BF16, attention="fp8", mlp="fp8")))
    assert ok.jobs[0].status == "ok"
    bad = evaluate(scenario, job_plan(precision=dict(ALL_BF16, **{group: "fp8"})))
    assert bad.jobs[0].status == "unstable"
    assert any("fp8 is for attention/mlp GEMMs only" in reason for reason in bad.reasons)


def test_training_integer_weights_is_unsupported():
    scenario = one_job("h100-sxm", "gpt2", "train", seq_len=1024, batch_size=8)
    result = evaluate(scenario, job_plan(precision=dict(ALL_BF16, mlp="int4")))
    assert result.jobs[0].status == "unsupported"
    # a LoRA job's frozen base may be int4 (QLoRA)
    lora = one_job("h100-sxm", "gpt2", "lora", seq_len=1024, batch_size=8)
    assert evaluate(lora, job_plan(precision=dict(ALL_BF16, mlp="int4"))).jobs[0].status == "ok"


def test_llama8b_batch1_decode_on_h100_matches_the_bandwidth_roofline_by_hand():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=1024, batch_size=1)
    result = evaluate(scenario, job_plan()).jobs[0]
    # streamed per step: all weights but the embedding lookup, bf16:
    # (8,030,261,248 − 128,256 × 4,096) × 2 B = 15,009,849,344 B;
    # KV read: the mean context, half of 1,024 tokens × 131,072 B = 67,108,864 B.
    # At 80 % of 3.35 TB/s: 15,076,958,208 / 2.68e12 = 5.6257 ms, plus 32 layers × 45 µs of fixed
    # per-layer cost = 7.0657 ms per token → 141.53 tokens/s.
    assert result.tokens_per_s == pytest.approx(141.53, rel=1e-3)
    roofline = GPUS["h100-sxm"].memory_bandwidth_gb_s * 1e9 / (MODELS["llama-3.1-8b"].num_params * 2)
    assert roofline == pytest.approx(209, rel=0.01)
    assert result.tokens_per_s <= roofline


def test_h200_decodes_faster_by_less_than_its_bandwidth_ratio():
    h100 = evaluate(one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=1024), job_plan()).jobs[0]
    h200 = evaluate(one_job("h200", "llama-3.1-8b", "serve", seq_len=1024), job_plan()).jobs[0]
    # the streaming time scales with bandwidth, the 32 × 45 µs of fixed per-layer cost does not:
    # (5.6257 + 1.44) ms ÷ (15,076,958,208 B / 3.84e12 B/s + 1.44 ms) = 7.0657 ÷ 5.3663
    assert h200.tokens_per_s / h100.tokens_per_s == pytest.approx(7.0657 / 5.3663, rel=1e-3)
    assert h200.tokens_per_s / h100.tokens_per_s < 4.8 / 3.35


def test_int4_weight_only_decode_is_faster_at_batch_1_but_less_than_its_bytes_say():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=1024, batch_size=1)
    bf16 = evaluate(scenario, job_plan()).jobs[0]
    int4 = evaluate(scenario, job_plan(precision=INT4_GEMMS)).jobs[0]
    # published batch-1 speed-ups are 1.9-2.7× (gpt-fast, AWQ TinyChat: the calibration table), not the
    # 3.9× of the bytes alone: dequantisation and the fixed per-layer cost
    assert 1.5 <= int4.tokens_per_s / bf16.tokens_per_s <= 3.0
    assert int4.quality_loss > bf16.quality_loss == 0.0


def test_tensor_parallel_decode_at_batch_1_scales_far_below_linear():
    """gpt-fast measured 2.94× from 1 to 8 A100s for Llama-3.1-8B at batch 1 (calibration table): the
    fixed per-layer cost and the all-reduce latency do not shrink with the shard."""
    tokens = {
        tp: evaluate(one_job("a100-80gb", "llama-3.1-8b", "serve", count=tp), job_plan(gpus=tp, tp=tp))
        .jobs[0]
        .tokens_per_s
        for tp in (1, 8)
    }
    assert 2.5 <= tokens[8] / tokens[1] <= 3.5


def test_memory_bound_decode_draws_a_fraction_of_tdp_and_training_nearly_all():
    decode = evaluate(one_job("h200", "llama-3.1-8b", "serve", seq_len=2048, batch_size=8), job_plan())
    assert 137 <= decode.jobs[0].power_w <= 300  # measured H200 decode: 137-300 W of 700 W
    training = one_job("h100-sxm", "llama-3.1-8b", "lora", seq_len=4096, batch_size=16)
    lora = evaluate(training, job_plan(micro_batch_size=4, activation_checkpointing=True)).jobs[0]
    assert lora.status == "ok" and lora.power_w >= 0.9 * GPUS["h100-sxm"].tdp_w


def test_kv_cache_memory_follows_the_formula_and_fp8_halves_it():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=4096, batch_size=8)
    bf16 = evaluate(scenario, job_plan(kv_cache="bf16")).jobs[0]
    fp8 = evaluate(scenario, job_plan(kv_cache="fp8")).jobs[0]
    # 2 · 32 layers · 8 kv heads · 128 head_dim · 4096 tokens · 8 sequences · 2 B = 4,294,967,296 B
    kv_bf16_gb = 2 * 32 * 8 * 128 * 4096 * 8 * 2 / 1e9
    assert bf16.memory_per_gpu_gb - fp8.memory_per_gpu_gb == pytest.approx(kv_bf16_gb / 2, rel=1e-9)
    longer = evaluate(
        one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=8192, batch_size=8), job_plan(kv_cache="bf16")
    ).jobs[0]
    assert longer.memory_per_gpu_gb - bf16.memory_per_gpu_gb == pytest.approx(kv_bf16_gb, rel=1e-9)


def test_tensor_parallelism_shards_weights_and_splits_heads():
    scenario = one_job("h100-sxm", "llama-3.1-70b", "serve", count=8, seq_len=4096, batch_size=8)
    tp4 = evaluate(scenario, job_plan(gpus=4, tp=4)).jobs[0]
    tp8 = evaluate(scenario, job_plan(gpus=8, tp=8)).jobs[0]
    assert tp4.status == tp8.status == "ok"
    assert tp8.memory_per_gpu_gb < tp4.memory_per_gpu_gb
    assert tp8.tokens_per_s > tp4.tokens_per_s
    # Qwen2.5-7B has 28 attention heads: tensor_parallel 8 cannot split them
    qwen = one_job("h100-sxm", "qwen2.5-7b", "serve", count=8, seq_len=1024)
    assert evaluate(qwen, job_plan(gpus=8, tp=8)).jobs[0].status == "unsupported"


def test_fp8_training_is_faster_but_less_than_2x():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "train", count=8, seq_len=4096, batch_size=64)
    common = {"gpus": 8, "tp": 4, "micro_batch_size": 4, "activation_checkpointing": True}
    bf16 = evaluate(scenario, job_plan(**common)).jobs[0]
    fp8 = evaluate(scenario, job_plan(precision=dict(ALL_BF16, attention="fp8", mlp="fp8"), **common)).jobs[0]
    assert bf16.status == fp8.status == "ok"
    assert 1.1 <= fp8.tokens_per_s / bf16.tokens_per_s <= 1.5


def test_checkpointing_trades_memory_for_compute():
    scenario = one_job("h100-sxm", "llama-3.1-8b", "lora", count=1, seq_len=4096, batch_size=16)
    plain = evaluate(scenario, job_plan(micro_batch_size=2)).jobs[0]
    ckpt = evaluate(scenario, job_plan(micro_batch_size=2, activation_checkpointing=True)).jobs[0]
    assert ckpt.memory_per_gpu_gb < plain.memory_per_gpu_gb
    assert ckpt.tokens_per_s < plain.tokens_per_s


def test_quality_tolerance_marks_a_plan_unstable():
    lenient = one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=1024)
    strict = one_job("h100-sxm", "llama-3.1-8b", "serve", seq_len=1024, max_quality_loss=0.01)
    assert evaluate(lenient, job_plan(precision=INT4_GEMMS)).jobs[0].status == "ok"
    result = evaluate(strict, job_plan(precision=INT4_GEMMS))
    assert result.jobs[0].status == "unstable"
    assert any("max_quality_loss" in reason for reason in result.reasons)


def test_prefill_costs_throughput_in_proportion_to_prompt_over_output():
    """With continuous batching every step also prefills the requests that replace finished ones: a long
    prompt per short answer costs more than a short prompt per long answer."""
    plan = job_plan(precision=dict(ALL_BF16), kv_cache="bf16")

    def tokens(prompt_len: int) -> float:
        scenario = one_job(
            "h100-sxm", "llama-3.1-8b", "serve", seq_len=4096, batch_size=64, prompt_len=prompt_len
        )
        return evaluate(scenario, plan).jobs[0].tokens_per_s

    decode_only, short_prompt, long_prompt = tokens(0), tokens(256), tokens(3840)
    assert long_prompt < short_prompt < decode_only * 1.01
    # 3,840 prompt tokens per 256 generated: prefill is most of the work
    assert long_prompt < 0.5 * decode_only


def test_fp8_weights_help_prefill_heavy_serving_more_than_int4():
    """Prefill is compute-bound: fp8 weights run on FP8 tensor cores, int4 ones are dequantised to 16-bit
    GEMMs; decode is memory-bound, where int4 streams the fewest bytes."""
    fp8 = dict(ALL_BF16, attention="fp8", mlp="fp8")
    int4 = dict(ALL_BF16, attention="int4", mlp="int4")

    def ratio(prompt_len: int, seq_len: int, batch: int) -> float:
        scenario = one_job(
            "h100-sxm", "llama-3.1-8b", "serve", seq_len=seq_len, batch_size=batch, prompt_len=prompt_len
        )
        fp8_tokens = evaluate(scenario, job_plan(precision=fp8, kv_cache="fp8")).jobs[0].tokens_per_s
        int4_tokens = evaluate(scenario, job_plan(precision=int4, kv_cache="fp8")).jobs[0].tokens_per_s
        return fp8_tokens / int4_tokens

    assert ratio(prompt_len=3968, seq_len=4096, batch=32) > 1.0 > ratio(prompt_len=0, seq_len=4096, batch=1)
