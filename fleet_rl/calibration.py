"""Published measurements the kernel is calibrated against: each with its source, the scenario and plan
that express it, and the kernel's own figure for it (issue #11).

A figure is ``fit`` when a constant in ``fleet_rl/kernel/constants.py`` was chosen to match it (the constant's
comment names it), and ``check`` when nothing was tuned to it. ``python benchmarks/calibration.py`` prints
the table (the README carries it); ``tests/test_calibration.py`` holds the tolerances: at least 90 % of the
figures within 25 % and none off by more than 2×.

Metrics. ``tokens_per_s``: the job's tokens/s (generated tokens for serving, trained tokens for training);
``tokens_per_s_per_gpu`` the same ÷ its GPUs.
``ms_per_token``: one sequence's decode step, ``1000 · batch ÷ tokens_per_s`` (an inter-token latency).
``memory_gb``: memory per GPU (it includes the kernel's 0.5 GB CUDA context). ``power_w_per_gpu``: the
job's draw ÷ its GPUs; a published *range* counts as met anywhere inside it. ``ratio`` and ``difference``
compare the figure's case with a baseline case (a speed-up, the memory a longer context adds).

Where a source measured something the kernel has no field for (a power cap, a NVLink topology other than
NVSwitch, a model outside the catalog with the same architecture), the figure's ``note`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleet_rl.catalog import MODULE_GROUPS
from fleet_rl.kernel import evaluate
from fleet_rl.scenario import Scenario

__all__ = ["FIGURES", "Case", "KernelFigure", "PublishedFigure", "Source", "kernel_figure"]

Metric = Literal["tokens_per_s", "tokens_per_s_per_gpu", "ms_per_token", "memory_gb", "power_w_per_gpu"]


@dataclass(frozen=True)
class Source:
    title: str
    url: str
    where: str  # table and row, or section
    quote: str  # the published row or sentence, verbatim


@dataclass(frozen=True)
class Case:
    """One job on one cluster under one plan: what the kernel is asked."""

    scenario: dict
    plan: dict

    def value(self, metric: Metric) -> float:
        scenario = Scenario.from_dict(self.scenario)
        job = evaluate(scenario, self.plan).jobs[0]
        if job.status != "ok":
            return float("nan")
        if metric == "tokens_per_s":
            return job.tokens_per_s
        if metric == "tokens_per_s_per_gpu":
            return job.tokens_per_s / job.gpus
        if metric == "ms_per_token":
            return 1000.0 * scenario.jobs[0].batch_size / job.tokens_per_s
        if metric == "memory_gb":
            return job.memory_per_gpu_gb
        return job.power_w / job.gpus


@dataclass(frozen=True)
class PublishedFigure:
    id: str
    what: str  # one line: model, GPU, setting
    metric: Metric
    published: float  # for a range, its midpoint
    case: Case
    source: Source
    role: Literal["fit", "check"]
    compare: Literal["value", "ratio", "difference"] = "value"  # the case's metric, or against ``baseline``
    baseline: Case | None = None
    published_range: tuple[float, float] | None = None
    note: str = ""


@dataclass(frozen=True)
class KernelFigure:
    figure: PublishedFigure
    kernel: float
    relative_error: float  # kernel ÷ published − 1 (0 inside a published range)

    @property
    def within_25_percent(self) -> bool:
        return abs(self.relative_error) <= 0.25

    @property
    def off_by_factor(self) -> float:
        """max(kernel/published, published/kernel): 1 is exact, 2 is off by 2×; inf if the kernel says
        the case does not run."""
        ratio = 1.0 + self.relative_error
        return max(ratio, 1.0 / ratio) if ratio > 0 else float("inf")


def kernel_figure(figure: PublishedFigure) -> KernelFigure:
    value = figure.case.value(figure.metric)
    if figure.compare == "ratio":
        value = value / figure.baseline.value(figure.metric)
    elif figure.compare == "difference":
        value = value - figure.baseline.value(figure.metric)
    if figure.published_range is not None:
        low, high = figure.published_range
        target = min(max(value, low), high)
        error = value / target - 1.0
    else:
        error = value / figure.published - 1.0
    return KernelFigure(figure, value, float("nan") if value != value else error)


# --- building cases ----------------------------------------------------------------------------------------


def formats(linear: str, other: str = "bf16") -> dict:
    """A precision map: ``linear`` for attention, MLP and the LM head, ``other`` for embedding and norms."""
    groups = {"attention": linear, "mlp": linear, "lm_head": linear}
    return {group: groups.get(group, other) for group in MODULE_GROUPS}


def serve(
    gpu: str,
    model: str,
    *,
    gpus: int = 1,
    batch: int = 1,
    seq_len: int = 256,
    weights: str = "bf16",
    kv=None,
    prompt_len: int = 0,
) -> Case:
    """One serving job with tensor parallelism over all its GPUs."""
    job = {"id": "job", "model": model, "kind": "serve", "priority": 1, "seq_len": seq_len}
    job["batch_size"] = batch
    if prompt_len:
        job["prompt_len"] = prompt_len
    part = {"id": "job", "gpus": gpus, "tensor_parallel": gpus, "precision": formats(weights)}
    if kv is not None:
        part["kv_cache"] = kv
    return Case({"cluster": {"gpu": gpu, "count": gpus}, "jobs": [job]}, {"jobs": [part]})


def train(
    gpu: str,
    model: str,
    *,
    kind: str = "train",
    gpus: int = 8,
    tp: int = 1,
    batch: int = 128,
    seq_len: int = 8192,
    micro_batch: int = 1,
    checkpointing: bool = False,
    gemm: str = "bf16",
    sharding: str = "none",
) -> Case:
    """One training job: ``gemm`` for attention and MLP (a lora job's frozen base), bf16 elsewhere, fp32
    norms."""
    job = {"id": "job", "model": model, "kind": kind, "priority": 1, "seq_len": seq_len, "batch_size": batch}
    part = {
        "id": "job",
        "gpus": gpus,
        "tensor_parallel": tp,
        "precision": formats(gemm) | {"lm_head": "bf16"},
    }
    part["precision"]["norm"] = "fp32"
    part |= {"micro_batch_size": micro_batch, "activation_checkpointing": checkpointing, "sharding": sharding}
    return Case({"cluster": {"gpu": gpu, "count": gpus}, "jobs": [job]}, {"jobs": [part]})


GPT_FAST = "gpt-fast README (pytorch-labs/gpt-fast @32971d3)"
GPT_FAST_URL = (
    "https://github.com/pytorch-labs/gpt-fast/blob/32971d3129541c5bfb4f715abc33d1c5f408d204/README.md"
)
GPT_FAST_NOTE = (
    "A100-80GB power-limited to 330 W, batch 1, 5-token prompt, torch.compile; TP over a hybrid cube mesh, "
    "not NVSwitch"
)
TRT_LLM = "TensorRT-LLM performance overview (NVIDIA/TensorRT-LLM @258c754, perf-overview.md)"
TRT_LLM_URL = (
    "https://github.com/NVIDIA/TensorRT-LLM/blob/258c7540c03517def55d9a5aadfa9288af474e1b/"
    "docs/source/performance/perf-overview.md"
)
TRT_LLM_ONLINE = "Online Serving Measurements (v0.14.0, BF16, ISL 467, OSL 256, QPS 2), column Mean ITL(ms)"
HF_LLAMA31 = "Llama 3.1 - 405B, 70B & 8B with multilinguality and long context (Hugging Face blog)"
HF_LLAMA31_URL = "https://huggingface.co/blog/llama31"
AWQ = "llm-awq TinyChat README (mit-han-lab/llm-awq @d6e797a, tinychat/README.md)"
AWQ_URL = (
    "https://github.com/mit-han-lab/llm-awq/blob/d6e797a42b9ef7778de8ee2352116e0f48a78d61/tinychat/README.md"
)


def gpt_fast(figure_id, what, published, case, row, role="check", **kw) -> PublishedFigure:
    source = Source(GPT_FAST, GPT_FAST_URL, kw.pop("where", "table Benchmarks"), row)
    metric = "tokens_per_s"
    return PublishedFigure(figure_id, what, metric, published, case, source, role, note=GPT_FAST_NOTE, **kw)


def trt_online(figure_id, what, published, case, row) -> PublishedFigure:
    source = Source(TRT_LLM, TRT_LLM_URL, TRT_LLM_ONLINE, row)
    note = "Triton TensorRT-LLM backend; ~1-2 sequences in flight at QPS 2 (Little's law); context 467+256"
    return PublishedFigure(figure_id, what, "ms_per_token", published, case, source, "check", note=note)


def hf_weights(figure_id, what, published, case, row) -> PublishedFigure:
    source = Source(HF_LLAMA31, HF_LLAMA31_URL, "Inference Memory Requirements table", row)
    note = "the blog counts weights only; the kernel adds its 0.5 GB CUDA context and a 256-token KV cache"
    return PublishedFigure(figure_id, what, "memory_gb", published, case, source, "check", note=note)


TRT_LLM_THROUGHPUT = "Throughput Measurements (v0.17, trtllm-bench, offline maximum throughput)"
TRT_LLM_THROUGHPUT_NOTE = (
    "output tokens/s of the whole TP group; FP8 runs use an FP8 KV cache; batch: the largest power of two "
    "up to the engine's 4,096 that the kernel fits (the engine sizes its batch to memory; "
    "tests/test_calibration.py checks the rule)"
)
TRT_LLM_BATCH_CAP = 4096


def trt_throughput(figure_id, what, published, case, row) -> PublishedFigure:
    source = Source(TRT_LLM, TRT_LLM_URL, TRT_LLM_THROUGHPUT, row)
    note = TRT_LLM_THROUGHPUT_NOTE
    return PublishedFigure(figure_id, what, "tokens_per_s", published, case, source, "check", note=note)


NEMO_2407 = "NeMo 24.07 performance summary (NVIDIA/NeMo @070a0bb, performance_summary.md)"
NEMO_2407_URL = (
    "https://github.com/NVIDIA/NeMo/blob/070a0bb168d405d653b9734c0017cf5078e77c0d/"
    "docs/source/performance/performance_summary.md"
)
MBRIDGE = "Megatron-Bridge performance archive, 25.11 (NVIDIA-NeMo/Megatron-Bridge @067f987)"
MBRIDGE_URL = (
    "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/067f987df03b8355b03192d88d70f1709fedf51a/"
    "docs/performance-summary-archive.md"
)
AUTOMODEL = "NeMo AutoModel performance summary (NVIDIA-NeMo/Automodel @36044ad)"
AUTOMODEL_URL = (
    "https://github.com/NVIDIA-NeMo/Automodel/blob/36044ad3d139363fb6c73c24af2e7c6b65ec52f6/"
    "docs/performance-summary.mdx"
)
AUTOMODEL_LORA = "Fine-Tuning (LoRA) Performance, DGX-H100, BF16 (rank 16, *_proj, seq 4096, LBS 2, GA 16)"
TORCHTITAN_URL = (
    "https://github.com/pytorch/torchtitan/blob/b5bcd76c66d0acb1a08b176d9639425bc55e0b2a/"
    "benchmarks/llama3_h100_202412_torchtitan.md"
)


def automodel_lora(figure_id, what, published, case, row, note="") -> PublishedFigure:
    source = Source(AUTOMODEL, AUTOMODEL_URL, AUTOMODEL_LORA, row)
    note = note or "Llama3 rows have Llama-3.1's dimensions; activation checkpointing not set in the config"
    return PublishedFigure(
        figure_id, what, "tokens_per_s_per_gpu", published, case, source, "check", note=note
    )


FIGURES: tuple[PublishedFigure, ...] = (
    # --- decode at batch 1 (gpt-fast, A100-80GB) ---------------------------------------------------------
    gpt_fast(
        "gptfast-llama31-8b-bf16-tp1",
        "Llama-3.1-8B bf16 decode, batch 1, 1× A100-80GB",
        93.89,
        serve("a100-80gb", "llama-3.1-8b"),
        "| Llama-3.1-8B  | Base    |  93.89  | 1410.76 |",
        role="fit",
    ),
    gpt_fast(
        "gptfast-llama31-8b-int8",
        "Llama-3.1-8B int8 weight-only decode, batch 1, 1× A100-80GB",
        137.64,
        serve("a100-80gb", "llama-3.1-8b", weights="int8"),
        "|           | 8-bit   | 137.64   | 1030.89 |",
        role="fit",
    ),
    *(
        gpt_fast(
            f"gptfast-llama31-8b-bf16-tp{tp}",
            f"Llama-3.1-8B bf16 decode, batch 1, TP {tp} on {tp}× A100-80GB",
            tokens,
            serve("a100-80gb", "llama-3.1-8b", gpus=tp),
            row,
            where="table Tensor Parallelism",
        )
        for tp, tokens, row in (
            (2, 149.10, "|           | 2   | 149.10   | 1197.32 |"),
            (4, 217.21, "|           | 4   | 217.21   | 986.32  |"),
            (8, 276.01, "|           | 8   | 276.01   | 772.60 |"),
        )
    ),
    gpt_fast(
        "gptfast-llama31-70b-bf16-tp4",
        "Llama-3.1-70B bf16 decode, batch 1, TP 4 on 4× A100-80GB",
        37.45,
        serve("a100-80gb", "llama-3.1-70b", gpus=4),
        "|           | 4   | 37.45   | 1360.53 |",
        where="table Tensor Parallelism",
    ),
    gpt_fast(
        "gptfast-llama31-70b-bf16-tp8",
        "Llama-3.1-70B bf16 decode, batch 1, TP 8 on 8× A100-80GB",
        58.78,
        serve("a100-80gb", "llama-3.1-70b", gpus=8),
        "|           | 8   | 58.78   | 1129.61 |",
        where="table Tensor Parallelism",
    ),
    gpt_fast(
        "gptfast-llama31-70b-int8-tp8",
        "Llama-3.1-70B int8 weight-only decode, batch 1, TP 8 on 8× A100-80GB",
        75.58,
        serve("a100-80gb", "llama-3.1-70b", gpus=8, weights="int8"),
        "|           | 8-bit   | 75.58    | 726.57 |",
        where="table Tensor Parallelism + Quantization",
    ),
    gpt_fast(
        "gptfast-mixtral-int8-1gpu",
        "Mixtral-8x7B int8 weight-only decode, batch 1, 1× A100-80GB",
        97.92,
        serve("a100-80gb", "mixtral-8x7b", weights="int8"),
        "|        int8      |   97.92 |   155.03  | 216.87 |  279.35    |",
        where="section Mixtral 8x7B, 1 GPU",
    ),
    gpt_fast(
        "gptfast-mixtral-bf16-tp2",
        "Mixtral-8x7B bf16 decode, batch 1, TP 2 on 2× A100-80GB",
        96.67,
        serve("a100-80gb", "mixtral-8x7b", gpus=2),
        "|baseline(bfloat16)|    OOM  |    96.67  | 155.35 |  227.82    |",
        where="section Mixtral 8x7B, 2 GPU",
    ),
    gpt_fast(
        "gptfast-mixtral-bf16-tp8",
        "Mixtral-8x7B bf16 decode, batch 1, TP 8 on 8× A100-80GB",
        227.82,
        serve("a100-80gb", "mixtral-8x7b", gpus=8),
        "|baseline(bfloat16)|    OOM  |    96.67  | 155.35 |  227.82    |",
        where="section Mixtral 8x7B, 8 GPU",
    ),
    # --- decode latency under light load (TensorRT-LLM, H100/H200) --------------------------------------
    trt_online(
        "trtllm-llama31-8b-h100-itl",
        "Llama-3.1-8B bf16 inter-token latency, 1× H100 SXM",
        8.0,
        serve("h100-sxm", "llama-3.1-8b", seq_len=723),
        "|LLaMA 3.1 8B||1|467|256|2|2|23|8|1423|504|",
    ),
    trt_online(
        "trtllm-llama31-8b-h200-itl",
        "Llama-3.1-8B bf16 inter-token latency, 1× H200",
        6.0,
        serve("h200", "llama-3.1-8b", seq_len=723),
        "|LLaMA 3.1 8B|H200 131GB HBM3|1|467|256|2|2|21|6|1425|504|",
    ),
    trt_online(
        "trtllm-llama31-70b-h100-itl",
        "Llama-3.1-70B bf16 inter-token latency, TP 4 on 4× H100 SXM",
        21.0,
        serve("h100-sxm", "llama-3.1-70b", gpus=4, seq_len=723),
        "|LLaMA 3.1 70B|H100 80GB HBM3|4|467|256|2|2|62|21|1406|498||",
    ),
    trt_online(
        "trtllm-llama31-70b-h200-itl",
        "Llama-3.1-70B bf16 inter-token latency, TP 4 on 4× H200",
        18.0,
        serve("h200", "llama-3.1-70b", gpus=4, seq_len=723),
        "|LLaMA 3.1 70B|H200 131GB HBM3|4|467|256|2|2|58|18|1411|499|",
    ),
    # --- weight-only quantised decode speed-ups (AWQ TinyChat, batch 1, 4 context tokens) -----------------
    PublishedFigure(
        "awq-llama3-8b-int4-4090",
        "Llama-3-8B int4 (AWQ) over fp16 decode speed-up, batch 1, RTX 4090",
        "tokens_per_s",
        2.69,
        serve("rtx-4090", "llama-3.1-8b", seq_len=64, weights="int4"),
        Source(AWQ, AWQ_URL, "Decoding Speed, RTX 4090 Results", "| LLaMA-3-8B  | 17.07 | 6.39 | 2.69x   |"),
        "check",
        compare="ratio",
        baseline=serve("rtx-4090", "llama-3.1-8b", seq_len=64, weights="fp16"),
        note="fp16 baseline is plain Hugging Face; Llama-3-8B has Llama-3.1-8B's dimensions",
    ),
    PublishedFigure(
        "awq-llama3-8b-int4-a100",
        "Llama-3-8B int4 (AWQ) over fp16 decode speed-up, batch 1, A100",
        "tokens_per_s",
        1.96,
        serve("a100-80gb", "llama-3.1-8b", seq_len=64, weights="int4"),
        Source(AWQ, AWQ_URL, "Decoding Speed, A100 Results", "| LLaMA-3-8B  | 12.37 | 6.29 | 1.96x   |"),
        "check",
        compare="ratio",
        baseline=serve("a100-80gb", "llama-3.1-8b", seq_len=64, weights="fp16"),
        note="A100 memory size not stated (a ratio hardly depends on it); the fp16 baseline is plain HF",
    ),
    # --- serving throughput at full load with prefill (TensorRT-LLM v0.17) -----------------------------
    trt_throughput(
        "trtllm-llama31-8b-h100-fp8-128-128",
        "Llama-3.1-8B FP8 serving throughput, 1× H100 SXM, 128 in / 128 out",
        28836.77,
        serve(
            "h100-sxm",
            "llama-3.1-8b",
            gpus=1,
            batch=4096,
            seq_len=256,
            prompt_len=128,
            weights="fp8",
            kv="fp8",
        ),
        "| LLaMA v3.1 8B | 1 | 128, 128 | 29526.04 | 28836.77 | 29852.96 | 9104.61 | 6627.27 |",
    ),
    trt_throughput(
        "trtllm-llama31-8b-h200-fp8-128-128",
        "Llama-3.1-8B FP8 serving throughput, 1× H200, 128 in / 128 out",
        29526.04,
        serve(
            "h200", "llama-3.1-8b", gpus=1, batch=4096, seq_len=256, prompt_len=128, weights="fp8", kv="fp8"
        ),
        "| LLaMA v3.1 8B | 1 | 128, 128 | 29526.04 | 28836.77 | 29852.96 | 9104.61 | 6627.27 |",
    ),
    trt_throughput(
        "trtllm-llama31-8b-l40s-fp8-128-128",
        "Llama-3.1-8B FP8 serving throughput, 1× L40S, 128 in / 128 out",
        9104.61,
        serve(
            "l40s", "llama-3.1-8b", gpus=1, batch=2048, seq_len=256, prompt_len=128, weights="fp8", kv="fp8"
        ),
        "| LLaMA v3.1 8B | 1 | 128, 128 | 29526.04 | 28836.77 | 29852.96 | 9104.61 | 6627.27 |",
    ),
    trt_throughput(
        "trtllm-llama31-8b-a100-fp16-128-128",
        "Llama-3.1-8B FP16 serving throughput, 1× A100-80GB, 128 in / 128 out",
        6627.27,
        serve(
            "a100-80gb",
            "llama-3.1-8b",
            gpus=1,
            batch=1024,
            seq_len=256,
            prompt_len=128,
            weights="fp16",
            kv="fp16",
        ),
        "| LLaMA v3.1 8B | 1 | 128, 128 | 29526.04 | 28836.77 | 29852.96 | 9104.61 | 6627.27 |",
    ),
    trt_throughput(
        "trtllm-llama31-8b-h100-fp8-128-2048",
        "Llama-3.1-8B FP8 serving throughput, 1× H100 SXM, 128 in / 2,048 out",
        21109.38,
        serve(
            "h100-sxm",
            "llama-3.1-8b",
            gpus=1,
            batch=512,
            seq_len=2176,
            prompt_len=128,
            weights="fp8",
            kv="fp8",
        ),
        "| | | 128, 2048 | 25398.86 | 21109.38 | 21769.55 | 5365.81 | 5255.99 |",
    ),
    trt_throughput(
        "trtllm-llama31-8b-a100-fp16-128-2048",
        "Llama-3.1-8B FP16 serving throughput, 1× A100-80GB, 128 in / 2,048 out",
        5255.99,
        serve(
            "a100-80gb",
            "llama-3.1-8b",
            gpus=1,
            batch=128,
            seq_len=2176,
            prompt_len=128,
            weights="fp16",
            kv="fp16",
        ),
        "| | | 128, 2048 | 25398.86 | 21109.38 | 21769.55 | 5365.81 | 5255.99 |",
    ),
    trt_throughput(
        "trtllm-llama31-70b-h100-fp8-tp4",
        "Llama-3.1-70B FP8 serving throughput, TP 4 on 4× H100 SXM, 128 in / 2,048 out",
        11511.93,
        serve(
            "h100-sxm",
            "llama-3.1-70b",
            gpus=4,
            batch=512,
            seq_len=2176,
            prompt_len=128,
            weights="fp8",
            kv="fp8",
        ),
        "| | 4 | 128, 2048 | 14156 | 11511.93 | | 1942.66 | 2811.27 |",
    ),
    trt_throughput(
        "trtllm-llama31-70b-h100-fp8-tp8",
        "Llama-3.1-70B FP8 serving throughput, TP 8 on 8× H100 SXM, 128 in / 2,048 out",
        17061.82,
        serve(
            "h100-sxm",
            "llama-3.1-70b",
            gpus=8,
            batch=1024,
            seq_len=2176,
            prompt_len=128,
            weights="fp8",
            kv="fp8",
        ),
        "| | 8 | 128, 2048 | 21195.88 | 17061.82 | | 2303.31 | 5241.5 |",
    ),
    trt_throughput(
        "trtllm-llama31-70b-a100-fp16-tp8",
        "Llama-3.1-70B FP16 serving throughput, TP 8 on 8× A100-80GB, 128 in / 2,048 out",
        5241.5,
        serve(
            "a100-80gb",
            "llama-3.1-70b",
            gpus=8,
            batch=512,
            seq_len=2176,
            prompt_len=128,
            weights="fp16",
            kv="fp16",
        ),
        "| | 8 | 128, 2048 | 21195.88 | 17061.82 | | 2303.31 | 5241.5 |",
    ),
    trt_throughput(
        "trtllm-mixtral-h100-fp8-128-128",
        "Mixtral-8x7B FP8 serving throughput, 1× H100 SXM, 128 in / 128 out",
        15962.49,
        serve(
            "h100-sxm",
            "mixtral-8x7b",
            gpus=1,
            batch=2048,
            seq_len=256,
            prompt_len=128,
            weights="fp8",
            kv="fp8",
        ),
        "| Mixtral 8x7B | 1 | 128, 128 | 17157.72 | 15962.49 | 16859.18 | | |",
    ),
    trt_throughput(
        "trtllm-mistral-h100-fp8-128-128",
        "Mistral-7B FP8 serving throughput, 1× H100 SXM, 128 in / 128 out",
        31674.49,
        serve(
            "h100-sxm", "mistral-7b", gpus=1, batch=4096, seq_len=256, prompt_len=128, weights="fp8", kv="fp8"
        ),
        "| Mistral 7B | 1 | 128, 128 | 31938.12 | 31674.49 | 32498.47 | 9664.13 | 6982.53 |",
    ),
    trt_throughput(
        "trtllm-mistral-a100-fp16-128-128",
        "Mistral-7B FP16 serving throughput, 1× A100-80GB, 128 in / 128 out",
        6982.53,
        serve(
            "a100-80gb",
            "mistral-7b",
            gpus=1,
            batch=2048,
            seq_len=256,
            prompt_len=128,
            weights="fp16",
            kv="fp16",
        ),
        "| Mistral 7B | 1 | 128, 128 | 31938.12 | 31674.49 | 32498.47 | 9664.13 | 6982.53 |",
    ),
    # --- memory (Hugging Face Llama 3.1 blog) -------------------------------------------------------------
    hf_weights(
        "hf-llama31-8b-fp16-weights",
        "Llama-3.1-8B fp16 weights",
        16.0,
        serve("h100-sxm", "llama-3.1-8b", weights="fp16"),
        "8B | 16 GB | 8 GB | 4 GB",
    ),
    hf_weights(
        "hf-llama31-70b-fp8-weights",
        "Llama-3.1-70B fp8 weights",
        70.0,
        serve("h200", "llama-3.1-70b", weights="fp8"),
        "70B | 140 GB | 70 GB | 35 GB",
    ),
    hf_weights(
        "hf-llama31-70b-int4-weights",
        "Llama-3.1-70B int4 weights",
        35.0,
        serve("h100-sxm", "llama-3.1-70b", weights="int4"),
        "70B | 140 GB | 70 GB | 35 GB",
    ),
    PublishedFigure(
        "hf-llama31-70b-kv-128k",
        "Llama-3.1-70B fp16 KV cache of one 128k-token sequence (memory added over a 1k context), 8× H200",
        "memory_gb",
        (39.06 - 0.313) * 2**30 / 1e9 / 8,
        serve("h200", "llama-3.1-70b", gpus=8, seq_len=131072, weights="fp16", kv="fp16"),
        Source(HF_LLAMA31, HF_LLAMA31_URL, "KV cache table", "70B | 0.313 GB | 4.88 GB | 39.06 GB"),
        "check",
        compare="difference",
        baseline=serve("h200", "llama-3.1-70b", gpus=8, seq_len=1024, weights="fp16", kv="fp16"),
        note="the blog's GB are GiB (its 8B 1k-token figure, 0.125, is 128 KiB × 1024); 8 KV heads over TP 8 "
        "put 1/8 on each GPU, so the published difference ÷ 8 is compared with the per-GPU one",
    ),
    # --- power ---------------------------------------------------------------------------------------------
    PublishedFigure(
        "power-h200-decode",
        "GPU power during GQA-model decode, 1× H200 (700 W TDP), Llama-3.1-8B bf16 at batch 32",
        "power_w_per_gpu",
        (137 + 300) / 2,
        serve("h200", "llama-3.1-8b", batch=32, seq_len=2048),
        Source(
            "Ma et al. 2026, The Illusion of Power Capping in LLM Decode, arXiv:2605.11999",
            "https://arxiv.org/html/2605.11999v1",
            "abstract",
            "on NVIDIA H200, decode draws only 137–300 W on a 700 W GPU",
        ),
        "fit",
        published_range=(137.0, 300.0),
        note="the abstract gives the range over four attention paradigms and their batch settings; the case "
        "(model, batch, context) is ours",
    ),
    # --- training throughput (NVIDIA NeMo / Megatron-Bridge / AutoModel, torchtitan) -----------------------
    PublishedFigure(
        "nemo2407-llama3-8b-fp8-h100",
        "Llama-3-8B FP8 pre-training, 8× H100 SXM, seq 8192, micro-batch 1, GBS 128",
        "tokens_per_s_per_gpu",
        12036.0,
        train("h100-sxm", "llama-3.1-8b", gemm="fp8", sharding="optimizer"),
        Source(
            NEMO_2407,
            NEMO_2407_URL,
            "pre-training at FP8, Container NeMo24.07, DGX-H100, row LLAMA3-8B",
            "| LLAMA3-8B     | 8      | 128  | 1   | 8192           | 1  | 1  | 2  | 1  "
            "| 12036              | 697",
        ),
        "fit",
        note="TP1 PP1 CP2 (the kernel has no context parallelism: 8-way data parallel here); Megatron's "
        "distributed optimizer expressed as sharding 'optimizer'; recomputation not stated (none assumed)",
    ),
    PublishedFigure(
        "mbridge-llama3-8b-fp8-fsdp-h100",
        "Llama-3-8B FP8 pre-training with FSDP, 8× H100 SXM, seq 8192, micro-batch 1, GBS 128",
        "tokens_per_s_per_gpu",
        14451.0,
        train("h100-sxm", "llama-3.1-8b", gemm="fp8", sharding="full"),
        Source(
            MBRIDGE,
            MBRIDGE_URL,
            "25.11 Pre-Training Performance, DGX-H100, row LLAMA3_8B",
            "| LLAMA3_8B | 8 | FP8-CS | 128 | 1 | 8192 | 8 | 1 | 1 | 1 | n/a | 1 | 16 | 14451 | 744 |",
        ),
        "check",
        note="a year of software after the fit figure; FSDP overlaps its all-gathers with compute, the "
        "kernel does not (its simplification)",
    ),
    PublishedFigure(
        "mbridge-llama3-8b-fp8-b200",
        "Llama-3-8B FP8 pre-training, 8× B200, seq 8192, micro-batch 2, GBS 128",
        "tokens_per_s_per_gpu",
        30624.0,
        train("b200", "llama-3.1-8b", gemm="fp8", sharding="optimizer", micro_batch=2),
        Source(
            MBRIDGE,
            MBRIDGE_URL,
            "25.11 Pre-Training Performance, DGX-B200, row LLAMA3_8B",
            "| LLAMA3_8B | 8 | FP8-CS (FP8-MX) | 128 | 2 | 8192 | 0 | 1 | 1 | 1 | n/a | 1 | 8 "
            "| 30624 (29521) |",
        ),
        "check",
        note="FSDP 0 is DDP; Megatron's distributed optimizer assumed (sharding 'optimizer'): plain DDP "
        "does not fit 8 B at micro-batch 2 in 180 GB by the kernel's count",
    ),
    automodel_lora(
        "automodel-lora-llama31-8b-h100",
        "Llama-3.1-8B LoRA r16 fine-tuning, bf16, 1× H100 SXM, seq 4096, micro-batch 2",
        12472.87,
        train("h100-sxm", "llama-3.1-8b", kind="lora", gpus=1, batch=32, seq_len=4096, micro_batch=2),
        "| Llama3 8B | 1 | 32 | 2 | 2 | 16 | 4096 | 1 | 1 | 1 | - | 1 | 1 | TE + triton | 10.51 | 402 "
        "| 12472.87 |",
    ),
    automodel_lora(
        "automodel-lora-qwen25-7b-h100",
        "Qwen2.5-7B LoRA r16 fine-tuning, bf16, 1× H100 SXM, seq 4096, micro-batch 2",
        14110.05,
        train("h100-sxm", "qwen2.5-7b", kind="lora", gpus=1, batch=32, seq_len=4096, micro_batch=2),
        "| Qwen2.5 7B | 1 | 32 | 2 | 2 | 16 | 4096 | 1 | 1 | 1 | - | 1 | 1 | TE + triton | 9.29 | 423 "
        "| 14110.05 |",
    ),
    automodel_lora(
        "automodel-lora-llama3-70b-h100",
        "Llama-3-70B LoRA r16 fine-tuning, bf16, 8× H100 SXM (TP 2 × FSDP 4), seq 4096, micro-batch 2",
        1091.85,
        train(
            "h100-sxm",
            "llama-3.1-70b",
            kind="lora",
            tp=2,
            batch=32,
            seq_len=4096,
            micro_batch=2,
            checkpointing=True,
            sharding="full",
        ),
        "| Llama3 70B | 8 | 32 | 2 | 2 | 4 | 4096 | 2 | 1 | 1 | - | 1 | 4 | TE + triton + fsdp2_prefetch "
        "| 15.00 | 316 | 1091.85 |",
        note="recomputation assumed: 80 layers of activations at micro-batch 2 do not fit without it",
    ),
    PublishedFigure(
        "torchtitan-llama31-8b-fp8-speedup",
        "Llama-3.1-8B Float8 over bf16 training speed-up, FSDP on 8× H100, local batch 2",
        "tokens_per_s",
        8532 / 6667,
        train(
            "h100-sxm",
            "llama-3.1-8b",
            batch=16,
            micro_batch=2,
            checkpointing=True,
            gemm="fp8",
            sharding="full",
        ),
        Source(
            "torchtitan Llama 3 H100 benchmark, end 2024 (pytorch/torchtitan @b5bcd76)",
            TORCHTITAN_URL,
            "Table 1, rows FSDP + torch.compile (6,667) and FSDP + torch.compile + Float8 (8,532)",
            "| FSDP + torch.compile | 6,667 | 77.0 | / | FSDP + torch.compile + Float8 | 8,532 | 76.8 |",
        ),
        "check",
        compare="ratio",
        baseline=train(
            "h100-sxm", "llama-3.1-8b", batch=16, micro_batch=2, checkpointing=True, sharding="full"
        ),
        note="the ratio of two published rows; their H100s are 96 GB HBM2e at 500 W and use selective "
        "recomputation, the kernel's full recomputation is the nearest it can express (seq 8192 is "
        "torchtitan's default config)",
    ),
    PublishedFigure(
        "korthikanti-full-recompute-overhead",
        "Full activation recomputation's slowdown of a training step (8× A100-80GB, TP 8, seq 2048)",
        "tokens_per_s",
        27.2 / 19.6,
        train("a100-80gb", "llama-3.1-8b", tp=8, batch=32, seq_len=2048, micro_batch=4),
        Source(
            "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models, "
            "arXiv:2205.05198",
            "https://arxiv.org/abs/2205.05198",
            "Table 4 (22B layer), rows Baseline no recompute (19.6 ms) and Baseline with recompute (27.2 ms)",
            "Baseline no recompute | 7.7 | 11.9 | 19.6 | - / "
            "Baseline with recompute | 7.7 | 19.5 | 27.2 | 39%",
        ),
        "check",
        compare="ratio",
        baseline=train(
            "a100-80gb", "llama-3.1-8b", tp=8, batch=32, seq_len=2048, micro_batch=4, checkpointing=True
        ),
        note="their layer is a 22B GPT's (h 6144, 64 heads); Llama-3.1-8B stands in: the overhead is a "
        "ratio of FLOPs and all-reduces, nearly independent of the model's size",
    ),
)
