"""The calibration table (fleet_rl/calibration.py): sources are complete and the kernel meets the tolerances
of the kernel-fidelity rework (≥ 90 % of the published figures within 25 %, none off by more than 2×)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fleet_rl.calibration import FIGURES, TRT_LLM_BATCH_CAP, TRT_LLM_THROUGHPUT, Case, kernel_figure

CONSTANTS = Path(__file__).resolve().parent.parent / "fleet_rl" / "kernel" / "constants.py"


@pytest.fixture(scope="module")
def results():
    return [kernel_figure(figure) for figure in FIGURES]


def test_at_least_twenty_figures_each_with_a_full_source():
    assert len(FIGURES) >= 20
    assert len({f.id for f in FIGURES}) == len(FIGURES)
    for figure in FIGURES:
        source = figure.source
        assert source.title and source.where and source.quote, figure.id
        assert source.url.startswith("https://"), figure.id
        assert figure.published > 0 and figure.role in ("fit", "check"), figure.id
        assert (figure.baseline is None) == (figure.compare == "value"), figure.id


def test_every_fit_figure_is_named_where_its_constant_is_set():
    constants = CONSTANTS.read_text(encoding="utf-8")
    for figure in FIGURES:
        if figure.role == "fit":
            assert f"[calibration: {figure.id}]" in constants, figure.id


def test_most_figures_are_checks_not_fits():
    assert sum(f.role == "check" for f in FIGURES) >= 2 * sum(f.role == "fit" for f in FIGURES)


def test_every_case_runs_on_the_kernel(results):
    for result in results:
        assert math.isfinite(result.kernel) and result.kernel > 0, result.figure.id


def test_ninety_percent_within_25_percent_and_none_off_by_2x(results):
    within = sum(r.within_25_percent for r in results)
    assert within >= 0.9 * len(results), [(r.figure.id, round(r.relative_error, 3)) for r in results]
    worst = max(results, key=lambda r: r.off_by_factor)
    assert worst.off_by_factor <= 2.0, (worst.figure.id, worst.kernel, worst.figure.published)


def test_a_published_range_counts_as_met_inside_it():
    figure = next(f for f in FIGURES if f.published_range is not None)
    result = kernel_figure(figure)
    low, high = figure.published_range
    assert (result.relative_error == 0.0) == (low <= result.kernel <= high)


def test_full_load_serving_figures_run_the_largest_batch_that_fits():
    """The TensorRT-LLM throughput figures' batch follows the stated rule, not a choice that fits the
    published number: the largest power of two up to the engine's cap at which the job still fits."""
    figures = [f for f in FIGURES if f.source.where == TRT_LLM_THROUGHPUT]
    assert len(figures) >= 10
    for figure in figures:
        job = figure.case.scenario["jobs"][0]
        batch = job["batch_size"]
        assert batch & (batch - 1) == 0 and batch <= TRT_LLM_BATCH_CAP, figure.id
        doubled = {**figure.case.scenario, "jobs": [{**job, "batch_size": 2 * batch}]}
        if batch < TRT_LLM_BATCH_CAP:
            assert math.isnan(Case(doubled, figure.case.plan).value("tokens_per_s")), figure.id
