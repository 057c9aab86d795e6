"""The Monitor's charts: readable from 2 to 50 annotators, n in the tooltips, PNG and SVG."""

from __future__ import annotations

import json
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from labeling.reports.monitor import charts


def _pairs(n: int) -> pd.DataFrame:
    names = [f"annotator {i:02d}" for i in range(n)]
    rng = np.random.default_rng(n)
    rows = [
        (a, b, float(rng.uniform(-0.2, 1)), int(rng.integers(2, 90)))
        for a, b in combinations(names, 2)
    ]
    one = pd.DataFrame(rows, columns=["a", "b", "kappa", "n"])
    both = pd.concat([one, one.rename(columns={"a": "b", "b": "a"})], ignore_index=True)
    return both[["a", "b", "kappa", "n"]]


def _spec(chart) -> str:
    return json.dumps(chart.to_dict())


@pytest.mark.parametrize("n", [2, 3, 12, 13, 50])
def test_kappa_matrix_reads_at_any_size(n: int) -> None:
    chart = charts.kappa_matrix(_pairs(n))
    spec = chart.to_dict()
    cell = spec["width"]["step"]
    assert spec["height"]["step"] == cell
    assert charts.CELL_MIN <= cell <= charts.CELL_MAX
    assert cell * (n - 1) <= max(charts.MATRIX_PX, charts.CELL_MIN * (n - 1))
    layers = spec.get("layer", [spec])
    enc = layers[0]["encoding"]
    assert len(enc["x"]["scale"]["domain"]) == n - 1  # every annotator has its column
    assert len(enc["y"]["scale"]["domain"]) == n - 1
    assert enc["x"]["axis"]["labelOverlap"] is False
    assert any(t.get("field") == "n" for t in enc["tooltip"])  # n in each cell's tooltip
    assert (len(layers) == 2) == (n <= charts.TEXT_UP_TO)  # numbers in cells while they fit
    data = next(iter(spec["datasets"].values()))
    assert len(data) == n * (n - 1) // 2  # each pair once: no mirrored half


def test_empty_inputs_give_no_chart() -> None:
    empty = pd.DataFrame(columns=["a", "b", "kappa", "n"])
    assert charts.kappa_matrix(empty) is None
    assert charts.progress_chart(pd.DataFrame()) is None
    assert charts.throughput_chart(pd.DataFrame(columns=["annotator", "per_hour"])) is None
    assert charts.time_chart(pd.DataFrame(columns=["annotator", "median_seconds"])) is None


@pytest.mark.parametrize("n", [2, 50])
def test_annotator_bars_take_a_row_each(n: int) -> None:
    rows = pd.DataFrame(
        {
            "annotator": [f"a{i}" for i in range(n)],
            "per_hour": 10.0,
            "submitted": 5,
            "active_hours": 1,
            "median_seconds": 20.0,
            "median_lo": 15.0,
            "median_hi": 25.0,
            "time_n": 5,
        }
    )
    for chart in (charts.throughput_chart(rows), charts.time_chart(rows)):
        spec = chart.to_dict()
        assert spec["height"] == {"step": charts.ROW_PX}
        assert "time_n" in _spec(chart) or "submitted" in _spec(chart)


def test_chart_bytes_svg_and_png() -> None:
    chart = charts.kappa_matrix(_pairs(3))
    svg = charts.chart_bytes(chart, "svg")
    assert svg.lstrip().startswith(b"<svg") and b"<path" in svg
    png = charts.chart_bytes(chart, "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000
    with pytest.raises(ValueError, match="format must be one of svg, png"):
        charts.chart_bytes(chart, "pdf")


@pytest.mark.parametrize(
    ("step", "periods", "expected"),
    [
        ("minute", ["2026-12-03 17:28", "2026-12-03 17:29"], "%H:%M"),
        ("hour", ["2026-12-03 09:00", "2026-12-03 23:00"], "%H:%M"),
        ("6 hours", ["2026-12-03 18:00", "2026-12-05 06:00"], "%b %d %H:%M"),
        ("day", ["2026-12-01", "2026-12-09"], "%Y-%m-%d"),
        ("week", ["2026-10-05", "2026-12-07"], "%Y-%m-%d"),
        ("month", ["2026-01-01", "2026-12-01"], "%Y-%m"),
    ],
)
def test_progress_axis_reads_a_24_hour_clock_and_dates_once_days_differ(
    step: str, periods: list[str], expected: str
) -> None:
    from labeling.reports.monitor.summary import BIN_STEPS

    assert step in {s.words for s in BIN_STEPS}
    cumulative = pd.DataFrame(
        {
            "period": pd.to_datetime(periods),
            "measure": "labelled",
            "works": [1, 2],
            "new": [1, 1],
            "step": step,
        }
    )
    chart = charts.progress_chart(cumulative)
    assert chart is not None
    axis = chart.to_dict()["encoding"]["x"]["axis"]
    assert axis["format"] == expected and "%I" not in axis["format"]
    ticks = [pd.Timestamp(t) for t in periods]  # a tick per bin, at its start
    assert axis["values"] == [
        {"year": t.year, "month": t.month, "date": t.day, "hours": t.hour, "minutes": t.minute}
        for t in ticks
    ]
    svg = charts.chart_bytes(chart, "svg").decode()  # Vega draws it (a bad axis spec fails here)
    if expected == "%H:%M":
        assert all(f">{t:%H:%M}<" in svg for t in ticks), svg[:300]
