"""Published measurements the kernel is calibrated against, and the kernel's own figure for each.

The figures are data: ``fleet_rl/calibration_figures.yaml`` (package data) holds each one's source, the
scenario and plan that express it and the value it claims; ``load_figures`` reads and validates it
(``msgspec``: types, allowed values, and the rules below) into ``FIGURES``.

A figure is ``fit`` when a constant in ``fleet_rl/kernel/constants.py`` was chosen to match it (the constant's
comment names it), and ``check`` when nothing was tuned to it. ``python -m benchmarks.kernel.calibration``
prints the table; ``tests/test_calibration.py`` holds the tolerances: at least 90 % of the figures within 25 %
and none off by more than 2×.

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
from importlib.resources import files
from typing import Literal

import msgspec

from fleet_rl.kernel import evaluate
from fleet_rl.scenario import Scenario

__all__ = [
    "FIGURES",
    "FIGURES_FILE",
    "Case",
    "KernelFigure",
    "PublishedFigure",
    "Source",
    "kernel_figure",
    "load_figures",
]

Metric = Literal["tokens_per_s", "tokens_per_s_per_gpu", "ms_per_token", "memory_gb", "power_w_per_gpu"]

FIGURES_FILE = "calibration_figures.yaml"  # inside the fleet_rl package
# The TensorRT-LLM throughput figures' ``where``, and the batch cap of their engine: the figures run the
# largest power of two up to the cap that the kernel fits (tests/test_calibration.py checks the rule).
TRT_LLM_THROUGHPUT = "Throughput Measurements (v0.17, trtllm-bench, offline maximum throughput)"
TRT_LLM_BATCH_CAP = 4096


class Source(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    title: str
    url: str
    where: str  # table and row, or section
    quote: str  # the published row or sentence, verbatim

    def __post_init__(self) -> None:
        if not (self.title and self.where and self.quote) or not self.url.startswith("https://"):
            raise ValueError("a source needs a title, an https:// url, where in it, and the quote")


class Case(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One job on one cluster under one plan: what the kernel is asked."""

    scenario: dict
    plan: dict

    def __post_init__(self) -> None:
        Scenario.from_dict(self.scenario)  # raises on a scenario the kernel cannot read

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


class PublishedFigure(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
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

    def __post_init__(self) -> None:
        if (self.baseline is None) != (self.compare == "value"):
            raise ValueError(f"compare {self.compare!r} needs a baseline case exactly when it is not 'value'")
        if self.published_range is not None:
            low, high = self.published_range
            if not low <= self.published <= high:
                raise ValueError(f"published {self.published} lies outside its range {self.published_range}")
        if self.compare != "difference" and self.published <= 0:
            raise ValueError(f"published {self.published} must be positive")


class Publication(msgspec.Struct, frozen=True):
    title: str
    url: str


class FiguresFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    publications: dict[str, Publication]  # YAML anchors the figures' sources merge in
    figures: tuple[PublishedFigure, ...]


def load_figures(text: str | bytes | None = None) -> tuple[PublishedFigure, ...]:
    """The figures of ``FIGURES_FILE`` (or of ``text``, the same YAML), validated; ids must be unique.
    Raises ``msgspec.ValidationError`` naming the offending field (``$.figures[3].metric``...)."""
    if text is None:
        text = files("fleet_rl").joinpath(FIGURES_FILE).read_bytes()
    figures = msgspec.yaml.decode(text, type=FiguresFile).figures
    ids = [figure.id for figure in figures]
    duplicated = sorted({figure_id for figure_id in ids if ids.count(figure_id) > 1})
    if duplicated:
        raise msgspec.ValidationError(f"figure ids appear more than once: {', '.join(duplicated)}")
    return figures


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


FIGURES: tuple[PublishedFigure, ...] = load_figures()
