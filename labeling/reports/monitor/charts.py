"""The Monitor's charts (Altair), sized to stay readable from 2 to 50 annotators, and their export.

Each builder takes a small aggregated table and returns an Altair chart, or None when there
is nothing to draw (the page then shows the table's one-sentence empty state). chart_bytes
saves a chart as SVG or PNG with Altair's own save, which renders through vl-convert-python.
"""

from __future__ import annotations

import io

import altair as alt
import pandas as pd

CELL_MAX, CELL_MIN, MATRIX_PX = 56, 11, 560  # kappa matrix: cell sizes and the target width
ROW_PX = 22  # height of one annotator's bar
TEXT_UP_TO = 12  # write kappa in the cells only while they are this few annotators
FORMATS = {"svg": "image/svg+xml", "png": "image/png"}


def progress_chart(cumulative: pd.DataFrame) -> alt.Chart | None:
    """Cumulative labels, skips, validated and disputed works over time, one line each."""
    if cumulative.empty:
        return None
    step = str(cumulative["step"].iloc[0])
    few = cumulative["period"].nunique() <= 20  # points only when they stay apart
    return (
        alt.Chart(cumulative)
        .mark_line(point=few, interpolate="step-after")
        .encode(
            x=alt.X(
                "period:T",
                title=f"time (UTC, one point per {step})",
                axis=alt.Axis(
                    format=time_format(cumulative["period"], step),
                    values=bin_ticks(cumulative["period"]),
                    labelOverlap=True,
                ),
            ),
            y=alt.Y("works:Q", title="cumulative count"),
            color=alt.Color(
                "measure:N", title=None, sort=["labelled", "skipped", "validated", "disputed"]
            ),
            tooltip=[
                alt.Tooltip("period:T", title=f"{step} from", format="%Y-%m-%d %H:%M"),
                "measure:N",
                alt.Tooltip("works:Q", title="so far"),
                alt.Tooltip("new:Q", title=f"in this {step}"),
            ],
        )
        .properties(height=260)
    )


def time_format(periods: pd.Series, step: str) -> str:
    """The progress axis's label format: 24-hour clock times, with the date once days differ.

    Vega-Lite's own labels for times are on a 12-hour clock without am/pm (17:28 reads
    05:28), under a title that says UTC.
    """
    if step in ("day", "week"):
        return "%Y-%m-%d"
    if step == "month":
        return "%Y-%m"
    days = pd.to_datetime(periods).dt.normalize().nunique()
    return "%H:%M" if days <= 1 else "%b %d %H:%M"


def bin_ticks(periods: pd.Series) -> list[alt.DateTime]:
    """A tick at the start of each bin (at most summary.MAX_BINS; labels that overlap hide).

    Left to itself, Vega-Lite put a tick every 5 seconds on a minute's span; a tick interval
    of minutes or hours (tickCount) passes its schema but fails in Vega 6 (no such unit).
    """
    starts = pd.to_datetime(pd.Series(periods.unique())).sort_values()
    return [
        alt.DateTime(year=t.year, month=t.month, date=t.day, hours=t.hour, minutes=t.minute)
        for t in starts
    ]


def kappa_matrix(pairs: pd.DataFrame) -> alt.Chart | None:
    """Cohen's kappa per pair of annotators as a lower-triangle matrix, n in each tooltip.

    Args:
        pairs: columns a, b, kappa, n (each pair once or both ways round).
    """
    if pairs.empty:
        return None
    one = pairs[pairs["a"] < pairs["b"]].copy()
    names = sorted(set(one["a"]) | set(one["b"]))
    if one.empty:
        return None
    cell = max(CELL_MIN, min(CELL_MAX, MATRIX_PX // max(len(names) - 1, 1)))
    x_names, y_names = names[:-1], names[1:]
    # Every annotator on both axes (a pair without a defined kappa stays an empty cell), and
    # every name written: overlap culling would hide most of them.
    font = max(8, min(12, cell - 2))
    base = alt.Chart(one).encode(
        x=alt.X(
            "a:N",
            title=None,
            scale=alt.Scale(domain=x_names),
            axis=alt.Axis(labelAngle=-45, labelLimit=120, labelOverlap=False, labelFontSize=font),
        ),
        y=alt.Y(
            "b:N",
            title=None,
            scale=alt.Scale(domain=y_names),
            axis=alt.Axis(labelLimit=120, labelOverlap=False, labelFontSize=font),
        ),
    )
    rects = base.mark_rect(stroke="white", strokeWidth=1).encode(
        color=alt.Color(
            "kappa:Q", title="kappa", scale=alt.Scale(domain=[-1, 1], scheme="redblue")
        ),
        tooltip=[
            alt.Tooltip("a:N", title="annotator"),
            alt.Tooltip("b:N", title="and"),
            alt.Tooltip("kappa:Q", format=".2f"),
            alt.Tooltip("n:Q", title="n (common works x questions)"),
        ],
    )
    chart = rects
    if len(names) <= TEXT_UP_TO:
        chart = rects + base.mark_text(fontSize=max(9, min(14, cell // 4))).encode(
            text=alt.Text("kappa:Q", format=".2f"),
            color=alt.condition("abs(datum.kappa) > 0.6", alt.value("white"), alt.value("black")),
        )
    return chart.properties(width=alt.Step(cell), height=alt.Step(cell))


def _rows() -> alt.Step:
    """One band of ROW_PX per annotator: the chart grows with the team, names stay legible."""
    return alt.Step(ROW_PX)


def throughput_chart(annotators: pd.DataFrame) -> alt.Chart | None:
    """Labels and skips per active hour, one bar per annotator, n in the tooltip."""
    rows = annotators.dropna(subset=["per_hour"])
    if rows.empty:
        return None
    return (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            y=alt.Y(
                "annotator:N",
                sort="-x",
                title=None,
                axis=alt.Axis(labelLimit=160, labelOverlap=False),
            ),
            x=alt.X("per_hour:Q", title="labels and skips per active hour"),
            tooltip=[
                "annotator:N",
                alt.Tooltip("per_hour:Q", format=".1f", title="per hour"),
                alt.Tooltip("submitted:Q", title="n (labels and skips)"),
                alt.Tooltip("active_hours:Q", title="active hours"),
            ],
        )
        .properties(height=_rows())
    )


def time_chart(annotators: pd.DataFrame) -> alt.Chart | None:
    """Median seconds per work with its 95% interval, one row per annotator."""
    rows = annotators.dropna(subset=["median_seconds"])
    if rows.empty:
        return None
    base = alt.Chart(rows).encode(
        y=alt.Y(
            "annotator:N",
            sort=alt.EncodingSortField("median_seconds", order="descending"),
            title=None,
            axis=alt.Axis(labelLimit=160, labelOverlap=False),
        ),
        tooltip=[
            "annotator:N",
            alt.Tooltip("median_seconds:Q", format=".1f", title="median s"),
            alt.Tooltip("median_lo:Q", format=".1f", title="95% CI from"),
            alt.Tooltip("median_hi:Q", format=".1f", title="to"),
            alt.Tooltip("time_n:Q", title="n (timed works)"),
        ],
    )
    points = base.mark_point(filled=True, size=60).encode(
        x=alt.X(
            "median_seconds:Q", title="median seconds per work (95% CI)", scale=alt.Scale(zero=True)
        )
    )
    bars = base.mark_rule().encode(x="median_lo:Q", x2="median_hi:Q")
    return (bars + points).properties(height=_rows())


def drift_chart(drift: pd.DataFrame) -> alt.Chart | None:
    """Agreement with the validated answer by week, per annotator and pooled."""
    if drift.empty:
        return None
    return (
        alt.Chart(drift)
        .mark_line(point=True)
        .encode(
            x=alt.X("period:T", title="week"),
            y=alt.Y("share:Q", title="agreement", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("annotator:N", title=None),
            tooltip=[
                "period:T",
                "annotator:N",
                alt.Tooltip("share:Q", format=".2f"),
                alt.Tooltip("lo:Q", format=".2f"),
                alt.Tooltip("hi:Q", format=".2f"),
                "n:Q",
            ],
        )
        .properties(height=240)
    )


def reliability_chart(bins: pd.DataFrame) -> alt.FacetChart | None:
    """Observed human rate against the mean teacher score per bin, one panel per question."""
    if bins.empty:
        return None
    base = alt.Chart().encode(
        x=alt.X("mean_score:Q", title="mean score in bin", scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("teacher:N"),
    )
    points = base.mark_line(point=True).encode(
        y=alt.Y("observed:Q", title="human rate", scale=alt.Scale(domain=[0, 1])),
        tooltip=[
            "question:N",
            "teacher:N",
            "n:Q",
            alt.Tooltip("observed:Q", format=".2f"),
            alt.Tooltip("lo:Q", format=".2f"),
            alt.Tooltip("hi:Q", format=".2f"),
        ],
    )
    bars = base.mark_rule().encode(y="lo:Q", y2="hi:Q")
    # Perfect calibration: the human rate equals the mean score.
    ideal = base.mark_line(strokeDash=[4, 4], color="gray").encode(y="mean_score:Q")
    return (
        alt.layer(ideal, bars, points, data=bins)
        .properties(width=180, height=180)
        .facet(facet=alt.Facet("question:N", title=None), columns=3)
    )


def chart_bytes(chart: alt.TopLevelMixin, fmt: str) -> bytes:
    """The chart as SVG or PNG bytes (Altair's save, rendered by vl-convert-python)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if fmt == "svg":
        text = io.StringIO()
        chart.save(text, format="svg")
        return text.getvalue().encode("utf-8")
    data = io.BytesIO()
    chart.save(data, format="png", scale_factor=2)
    return data.getvalue()
