"""The kernel against published measurements: every figure of ``fleet_rl/calibration_figures.yaml``.
Prints JSON.

    python -m benchmarks.kernel.calibration             # JSON: each figure, the kernel's value, its error
    python -m benchmarks.kernel.calibration --markdown  # the README's table

No timing here: the numbers are the kernel's physics, identical on every machine.
"""

from __future__ import annotations

import argparse
import json

from fleet_rl.calibration import FIGURES, KernelFigure, kernel_figure

UNITS = {
    "tokens_per_s": "tok/s",
    "tokens_per_s_per_gpu": "tok/s/GPU",
    "ms_per_token": "ms/token",
    "memory_gb": "GB/GPU",
    "power_w_per_gpu": "W/GPU",
}


def summary(results: list[KernelFigure]) -> dict:
    return {
        "figures": len(results),
        "fit": sum(r.figure.role == "fit" for r in results),
        "check": sum(r.figure.role == "check" for r in results),
        "within_25_percent": sum(r.within_25_percent for r in results),
        "checks_within_25_percent": sum(r.within_25_percent for r in results if r.figure.role == "check"),
        "worst_factor": round(max(r.off_by_factor for r in results), 3),
        "median_abs_error_percent": round(
            100 * sorted(abs(r.relative_error) for r in results)[len(results) // 2], 1
        ),
    }


def unit(result: KernelFigure) -> str:
    figure = result.figure
    if figure.compare == "ratio":
        return "×"
    return UNITS[figure.metric]


def as_json(results: list[KernelFigure]) -> dict:
    return {
        "summary": summary(results),
        "figures": [
            {
                "id": r.figure.id,
                "what": r.figure.what,
                "role": r.figure.role,
                "metric": r.figure.metric,
                "compare": r.figure.compare,
                "unit": unit(r),
                "published": round(r.figure.published, 3),
                "published_range": r.figure.published_range,
                "kernel": round(r.kernel, 3),
                "error_percent": round(100 * r.relative_error, 1),
                "source": r.figure.source.title,
                "url": r.figure.source.url,
                "where": r.figure.source.where,
                "quote": r.figure.source.quote,
                "note": r.figure.note,
            }
            for r in results
        ],
    }


def number(value: float) -> str:
    """A figure as the table prints it: thousands separated, three significant digits below 100."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def as_markdown(results: list[KernelFigure]) -> str:
    lines = ["| figure | published | kernel | error | fit/check | source |", "|---|---:|---:|---:|---|---|"]
    for r in results:
        figure = r.figure
        published = (
            f"{figure.published_range[0]:g}–{figure.published_range[1]:g}"
            if figure.published_range
            else number(figure.published)
        )
        lines.append(
            f"| {figure.what} | {published} {unit(r)} | {number(r.kernel)} | {100 * r.relative_error:+.0f} % "
            f"| {figure.role} | [{figure.source.where}]({figure.source.url}) |"
        )
    s = summary(results)
    lines.append("")
    lines.append(
        f"{s['within_25_percent']} of {s['figures']} within 25 % ({s['checks_within_25_percent']} of "
        f"{s['check']} checks); worst off by {s['worst_factor']}×; median |error| "
        f"{s['median_abs_error_percent']} %."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print the README table instead of JSON")
    args = parser.parse_args(argv)
    results = [kernel_figure(figure) for figure in FIGURES]
    print(as_markdown(results) if args.markdown else json.dumps(as_json(results), indent=2))


if __name__ == "__main__":
    main()
