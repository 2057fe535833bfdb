"""Published measurements the kernel is calibrated against: each with its source, the scenario and plan
that express it, and the kernel's own figure for it (issue #11).

A figure is ``fit`` when a constant in ``fleet_rl/kernel/constants.py`` was chosen to match it (the constant's
comment names it), and ``check`` when nothing was tuned to it. ``python benchmarks/calibration.py`` prints
the table (the README carries it); ``tests/test_calibration.py`` holds the tolerances: at least 90 % of the
figures within 25 % and none off by more than 2×.

Metrics. ``tokens_per_s``: the job's tokens/s (generated tokens for serving, trained tokens for training).
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

Metric = Literal["tokens_per_s", "ms_per_token", "memory_gb", "power_w_per_gpu"]


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
    gpu: str, model: str, *, gpus: int = 1, batch: int = 1, seq_len: int = 256, weights: str = "bf16", kv=None
) -> Case:
    """One serving job with tensor parallelism over all its GPUs."""
    job = {"id": "job", "model": model, "kind": "serve", "priority": 1, "seq_len": seq_len}
    job["batch_size"] = batch
    part = {"id": "job", "gpus": gpus, "tensor_parallel": gpus, "precision": formats(weights)}
    if kv is not None:
        part["kv_cache"] = kv
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
)
