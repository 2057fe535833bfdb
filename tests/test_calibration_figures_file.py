"""fleet_rl/calibration_figures.yaml is validated as it is read: a wrong field is named, never half-loaded."""

from __future__ import annotations

from importlib.resources import files

import msgspec
import pytest

from fleet_rl.calibration import FIGURES, FIGURES_FILE, load_figures

TEXT = files("fleet_rl").joinpath(FIGURES_FILE).read_text(encoding="utf-8")


def test_the_file_loads_into_the_figures():
    assert load_figures(TEXT) == FIGURES
    assert all(figure.source.title and figure.source.url for figure in FIGURES)  # merged from publications


def _edited(old: str, new: str) -> str:
    assert old in TEXT
    return TEXT.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("metric: tokens_per_s\n", "metric: tokens_per_minute\n", "$.figures[0].metric"),
        ("role: fit\n", "role: guess\n", "$.figures[0].role"),
        ("published: 93.89\n", "published: fast\n", "$.figures[0].published"),
        ("published: 93.89\n", "published: 93.89\n    compare: ratio\n", "needs a baseline case"),
        ("published: 93.89\n", "published: 93.89\n    speed: 1\n", "unknown field `speed`"),
        ("url: https://github.com/pytorch-labs", "url: ftp://github.com/pytorch-labs", "https:// url"),
        ("id: gptfast-llama31-8b-int8\n", "id: gptfast-llama31-8b-bf16-tp1\n", "more than once"),
        ("{gpu: a100-80gb, count: 1}", "{gpu: a100-80gb, count: -1}", "$.figures[0].case"),
        ("published: 218.5", "published: 400.0", "outside its range"),
    ],
)
def test_a_bad_record_is_refused_with_the_field_named(old, new, problem):
    with pytest.raises(msgspec.ValidationError, match=problem.replace("$", r"\$").replace("[", r"\[")):
        load_figures(_edited(old, new))
