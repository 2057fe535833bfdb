"""Tests of fleet_rl.catalog: public keys, hand-computed parameter counts, support flags, invariants."""

from __future__ import annotations

import dataclasses

import pytest

from fleet_rl.catalog import GPUS, MODELS, MODULE_GROUPS, PRECISIONS, GPUSpec, ModelSpec

# ----------------------------------------------------------------------------------------------------------
# Public vocabulary and keys (outside tools depend on these exact strings).
# ----------------------------------------------------------------------------------------------------------


def test_precisions_and_module_groups_are_the_public_vocabulary():
    assert PRECISIONS == ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
    assert MODULE_GROUPS == ("embedding", "attention", "mlp", "norm", "lm_head")


def test_gpu_keys_exact():
    assert set(GPUS) == {
        "h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "l40s",
        "l4", "a10g", "t4", "rtx-4090", "b200", "mi300x",
    }  # fmt: skip


def test_model_keys_exact():
    assert set(MODELS) == {
        "llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b", "qwen2.5-72b", "mixtral-8x7b", "gpt2",
    }  # fmt: skip


def test_each_spec_is_filed_under_its_own_name():
    assert all(key == spec.name for key, spec in GPUS.items())
    assert all(key == spec.name for key, spec in MODELS.items())


# ----------------------------------------------------------------------------------------------------------
# Parameter counts, derived from config dims (hand-computed expectations in the comments).
# ----------------------------------------------------------------------------------------------------------

# Published totals (DESIGN.md §4 / model cards); the derived count must be within 0.5%.
PUBLISHED_TOTALS = {
    "llama-3.1-8b": 8.030e9,
    "llama-3.1-70b": 70.55e9,
    "mistral-7b": 7.24e9,
    "qwen2.5-7b": 7.62e9,
    "qwen2.5-72b": 72.7e9,
    "mixtral-8x7b": 46.7e9,
    "gpt2": 124.4e6,
}


@pytest.mark.parametrize(("name", "published"), sorted(PUBLISHED_TOTALS.items()))
def test_total_params_match_published_within_half_percent(name, published):
    assert MODELS[name].num_params == pytest.approx(published, rel=0.005)


def test_llama_3_1_8b_exact_count():
    # embed 128256*4096 = 525,336,576 (and the same again for the untied lm_head)
    # per layer: q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 = 41,943,040
    #            mlp 3*4096*14336 = 176,160,768; norms 2*4096 = 8,192   -> 218,112,000
    # 32 layers = 6,979,584,000; + 2*525,336,576 + final norm 4,096 = 8,030,261,248
    model = MODELS["llama-3.1-8b"]
    assert model.num_params == 8_030_261_248
    assert dict(model.params_by_group) == {
        "embedding": 525_336_576,
        "attention": 32 * 41_943_040,
        "mlp": 32 * 176_160_768,
        "norm": 65 * 4096,
        "lm_head": 525_336_576,
    }


def test_llama_3_1_70b_exact_count():
    # per layer: attn 2*8192^2 + 2*8192*1024 = 150,994,944; mlp 3*8192*28672 = 704,643,072; norms 16,384
    # 80 layers = 68,452,352,000; + 2 * 128256*8192 (2,101,346,304) + 8,192 = 70,553,706,496
    assert MODELS["llama-3.1-70b"].num_params == 70_553_706_496


def test_mistral_7b_exact_count():
    # same layers as Llama-3.1-8B (6,979,584,000) + 2 * 32000*4096 (262,144,000) + 4,096 = 7,241,732,096
    assert MODELS["mistral-7b"].num_params == 7_241_732_096


def test_qwen2_5_7b_exact_count_includes_qkv_biases():
    # per layer attention: q 3584^2 + k,v 2*3584*512 + o 3584^2 = 29,360,128 weights
    #                      + q,k,v biases 3584 + 2*512 = 4,608                  -> 29,364,736
    # mlp 3*3584*18944 = 203,685,888; norms 7,168 -> 233,057,792 per layer; 28 layers = 6,525,618,176
    # + embed and untied head 2 * 152064*3584 (1,089,994,752) + 3,584 = 7,615,616,512
    model = MODELS["qwen2.5-7b"]
    assert model.params_by_group["attention"] == 28 * 29_364_736
    assert model.num_params == 7_615_616_512


def test_qwen2_5_72b_exact_count():
    # per layer: attn 150,994,944 + biases 8192 + 2*1024 = 151,005,184; mlp 3*8192*29568 = 726,663,168;
    # norms 16,384 -> 877,684,736; 80 layers = 70,214,778,880; + 2 * 152064*8192 (2,491,416,576) + 8,192
    assert MODELS["qwen2.5-72b"].num_params == 72_706_203_648


def test_mixtral_total_and_active_params():
    # per layer: attn 41,943,040; 8 experts * 176,160,768 = 1,409,286,144; router 4096*8 = 32,768; norms 8,192
    # total = 32 * 1,451,270,144 + 262,144,000 + 4,096 = 46,702,792,704
    # active per layer = 41,943,040 + 2 * 176,160,768 + 32,768 + 8,192 = 394,305,536
    # active = 32 * 394,305,536 + 262,144,000 + 4,096 = 12,879,925,248
    model = MODELS["mixtral-8x7b"]
    assert model.num_params == 46_702_792_704
    assert model.num_active_params == 12_879_925_248
    assert model.num_active_params == pytest.approx(12.9e9, rel=0.005)
    assert model.gemm_params_by_group["mlp"] == 32 * (2 * 176_160_768 + 32_768)


def test_gpt2_exact_count_by_group():
    # embedding: wte 50257*768 = 38,597,376 + wpe 1024*768 = 786,432 = 39,383,808
    # attention per layer: c_attn 768*2304 + 2304 = 1,771,776; c_proj 768*768 + 768 = 590,592 -> 2,362,368
    # mlp per layer: c_fc 768*3072 + 3072 = 2,362,368; c_proj 3072*768 + 768 = 2,360,064 -> 4,722,432
    # norms: (ln_1 + ln_2) 2 * 1536 per layer * 12 + ln_f 1536 = 38,400; lm_head tied -> 0
    # total 39,383,808 + 12*2,362,368 + 12*4,722,432 + 38,400 = 124,439,808
    model = MODELS["gpt2"]
    assert dict(model.params_by_group) == {
        "embedding": 39_383_808,
        "attention": 28_348_416,
        "mlp": 56_669_184,
        "norm": 38_400,
        "lm_head": 0,
    }
    assert model.num_params == 124_439_808


def test_kv_cache_bytes_per_token_llama_8b_bf16_is_128_kib():
    # 2 (K and V) * 32 layers * 8 kv heads * 128 head_dim * 2 bytes = 131,072
    assert MODELS["llama-3.1-8b"].kv_cache_bytes_per_token() == 131072
    assert MODELS["llama-3.1-8b"].kv_cache_bytes_per_token(1.0) == 65536  # fp8 KV cache halves it


def test_kv_cache_gpt2_uses_full_multi_head_attention():
    # 2 * 12 layers * 12 heads * 64 head_dim * 2 bytes = 36,864
    assert MODELS["gpt2"].kv_cache_bytes_per_token() == 36864


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_invariants(name):
    model = MODELS[name]
    assert tuple(model.params_by_group) == MODULE_GROUPS
    assert tuple(model.gemm_params_by_group) == MODULE_GROUPS
    assert sum(model.params_by_group.values()) == model.num_params
    assert model.gemm_params_by_group["lm_head"] == model.vocab_size * model.hidden_size
    assert model.gemm_params_by_group["embedding"] == 0
    assert model.gemm_params_by_group["norm"] == 0
    assert model.gemm_params_by_group["attention"] == model.params_by_group["attention"]
    assert 0 < model.num_active_params <= model.num_params
    assert model.head_dim_ * model.num_attention_heads == model.hidden_size  # true for all seven models
    if model.tie_word_embeddings:
        assert model.params_by_group["lm_head"] == 0
    else:
        assert model.params_by_group["lm_head"] == model.vocab_size * model.hidden_size
    if model.num_experts == 1:
        assert model.num_active_params == model.num_params
        assert model.gemm_params_by_group["mlp"] == model.params_by_group["mlp"]
    else:
        assert model.gemm_params_by_group["mlp"] < model.params_by_group["mlp"]


# ----------------------------------------------------------------------------------------------------------
# GPUs
# ----------------------------------------------------------------------------------------------------------


def test_support_flags():
    for name in ("a100-40gb", "a100-80gb", "a10g", "t4"):
        assert not GPUS[name].supports("fp8"), name
    assert not GPUS["t4"].supports("bf16")
    assert GPUS["t4"].supports("fp16")
    for name in ("h100-sxm", "h100-pcie", "h200", "l40s", "l4", "rtx-4090", "b200", "mi300x"):
        assert GPUS[name].supports("fp8"), name
    # Weight-only formats are dequantised to 16-bit compute, so every GPU takes them.
    assert all(gpu.supports("int8") and gpu.supports("int4") for gpu in GPUS.values())
    assert all(gpu.supports("fp32") for gpu in GPUS.values())
    assert not GPUS["b200"].supports("fp4")  # not in the plan vocabulary


def test_memory_gb_of_h100():
    # 81,559 MiB * 1,048,576 B/MiB / 1e9 = 85.5208 GB
    assert GPUS["h100-sxm"].memory_gb == pytest.approx(85.52, abs=0.01)


def test_figures_named_in_the_design():
    h100 = GPUS["h100-sxm"]
    assert (h100.memory_bandwidth_gb_s, h100.tdp_w, h100.interconnect_gb_s) == (3350.0, 700.0, 450.0)
    assert h100.dense_tflops["bf16"] == pytest.approx(989, abs=1)
    assert h100.dense_tflops["fp8"] == pytest.approx(1979, abs=1)
    l4 = GPUS["l4"]
    assert (l4.memory_mib, l4.memory_bandwidth_gb_s, l4.tdp_w) == (23034, 300.0, 72.0)
    assert l4.dense_tflops["bf16"] == pytest.approx(121, abs=1)
    assert l4.dense_tflops["fp8"] == pytest.approx(242, abs=1)
    assert GPUS["a100-80gb"].memory_mib == 81920
    assert GPUS["a100-80gb"].dense_tflops["bf16"] == 312.0
    assert GPUS["t4"].memory_mib == 15360
    assert GPUS["t4"].dense_tflops["fp16"] == 65.0
    assert GPUS["h200"].memory_bandwidth_gb_s == 4800.0
    assert GPUS["b200"].interconnect_gb_s == 900.0


@pytest.mark.parametrize("name", sorted(GPUS))
def test_gpu_invariants(name):
    gpu = GPUS[name]
    numbers = (
        gpu.memory_mib, gpu.memory_bandwidth_gb_s, gpu.tdp_w, gpu.idle_w,
        gpu.interconnect_gb_s, gpu.interconnect_latency_us, *gpu.dense_tflops.values(),
    )  # fmt: skip
    assert all(value > 0 for value in numbers)
    assert gpu.idle_w < gpu.tdp_w
    assert gpu.interconnect in {"nvlink", "pcie", "infinity-fabric"}
    assert set(gpu.dense_tflops) <= {"fp32", "bf16", "fp16", "fp8"}
    # Lower-precision tensor peaks are never below higher-precision ones.
    peaks = [gpu.dense_tflops[p] for p in ("fp32", "fp16", "fp8") if p in gpu.dense_tflops]
    assert peaks == sorted(peaks)
    # NVLink / Infinity Fabric is faster and lower-latency than any PCIe link in the catalog.
    if gpu.interconnect == "pcie":
        assert gpu.interconnect_gb_s <= 64 and gpu.interconnect_latency_us >= 15


# ----------------------------------------------------------------------------------------------------------
# Immutability and bad configs.
# ----------------------------------------------------------------------------------------------------------


def test_specs_are_frozen_hashable_and_tables_read_only():
    gpu = GPUS["h100-sxm"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu.tdp_w = 1.0
    with pytest.raises(TypeError):
        gpu.dense_tflops["fp8"] = 1.0
    with pytest.raises(TypeError):
        GPUS["new"] = gpu
    with pytest.raises(TypeError):
        MODELS["llama-3.1-8b"].params_by_group["mlp"] = 0
    assert len({gpu, GPUS["h100-sxm"], GPUS["t4"]}) == 2
    assert len({*MODELS.values()}) == len(MODELS)


def test_dense_tflops_is_copied_from_the_callers_dict():
    peaks = {"fp32": 1.0, "bf16": 2.0}
    gpu = dataclasses.replace(GPUS["l4"], name="probe", dense_tflops=peaks)
    peaks["fp8"] = 4.0
    assert not gpu.supports("fp8")


@pytest.mark.parametrize(
    "change",
    [
        {"idle_w": 80.0},  # idle above a 72 W TDP
        {"dense_tflops": {"fp32": 30.3, "int8": 242.0}},  # int8 is weight-only, it has no peak
        {"dense_tflops": {"bf16": 121.0}},  # missing fp32
        {"interconnect": "ethernet"},
        {"memory_mib": 0},
    ],
)
def test_bad_gpu_spec_raises(change):
    with pytest.raises(ValueError):
        dataclasses.replace(GPUS["l4"], **change)


@pytest.mark.parametrize(
    "change",
    [
        {"experts_per_token": 2},  # a dense model has one expert
        {"num_key_value_heads": 5},  # 32 heads are not a multiple of 5
        {"hidden_size": 4095},  # not divisible by 32 heads without an explicit head_dim
        {"num_layers": 0},
    ],
)
def test_bad_model_spec_raises(change):
    with pytest.raises(ValueError):
        dataclasses.replace(MODELS["llama-3.1-8b"], **change)


def test_explicit_head_dim_is_used():
    model = ModelSpec(
        name="probe", hf_id="none", hidden_size=64, intermediate_size=128, num_layers=1,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=10, max_position_embeddings=8, head_dim=32,
    )  # fmt: skip
    # q 64*128 + k,v 2*64*64 + o 128*64 = 8192 + 8192 + 8192 = 24,576
    assert model.head_dim_ == 32
    assert model.params_by_group["attention"] == 24_576
    # 2 * 1 layer * 2 kv heads * 32 * 2 bytes = 256
    assert model.kv_cache_bytes_per_token() == 256


def test_gpu_spec_accepts_a_plain_dict():
    gpu = GPUSpec(
        name="probe", memory_mib=1024, memory_bandwidth_gb_s=100.0, dense_tflops={"fp32": 1.0},
        tdp_w=100.0, idle_w=10.0, interconnect="pcie", interconnect_gb_s=16.0, interconnect_latency_us=25.0,
    )  # fmt: skip
    assert gpu.memory_gb == pytest.approx(1.073741824)
    assert not gpu.supports("bf16") and gpu.supports("int4")
