"""The agent page's chart: daily exact-match rate, one line per agent version (a Plotly dict drawn
by our static plotly.js, on the app's shared layout)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from dashboard.servers.charts import base_layout, chart_text
from ingest.capture.models import Agent
from ingest.fidelity.selectors.agents import DayRate, agent_label
from ingest.fidelity.selectors.common import exact_rate

DAY_MS = 86_400_000
CHART_COLORS = ["#2f5fd0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#2c7a7b", "#744210", "#4a5568"]


def _day_axis(days: list[date]) -> dict[str, Any]:
    """A date axis with day ticks; with under a week of data, pad it to a week so Plotly does not
    zoom into milliseconds around a single day."""
    axis: dict[str, Any] = {
        "type": "date",
        "title": {"text": "day (UTC)"},
        "gridcolor": "#e3e6eb",
        "tickformat": "%b %d",
    }
    if days:
        first, last = min(days), max(days)
        if (last - first).days < 7:
            pad = timedelta(days=(7 - (last - first).days) / 2 + 0.5)
            axis["range"] = [(first - pad).isoformat(), (last + pad).isoformat()]
            axis["dtick"] = 86_400_000
    return axis


def gapped(points: list[DayRate]) -> tuple[list[str], list[float | None], list[list[int]]]:
    """(x, y, customdata) with a break after every day followed by a day without data, so the line
    is not drawn across days nobody pasted anything (plotly leaves a gap at a null)."""
    x: list[str] = []
    y: list[float | None] = []
    custom: list[list[int]] = []
    for i, (day, exact, judged) in enumerate(points):
        if i and (day - points[i - 1][0]).days > 1:
            x.append((points[i - 1][0] + timedelta(days=1)).isoformat())
            y.append(None)
            custom.append([0, 0])
        x.append(day.isoformat())
        y.append(exact_rate(exact, judged))
        custom.append([exact, judged])
    return x, y, custom


def exact_rate_figure(agents: list[Agent], series: dict[int | None, list[DayRate]]) -> dict[str, Any]:
    """Plotly figure: one line per agent version, daily exact-match rate (%)."""
    data = []
    for index, agent in enumerate(agents):
        points = series.get(agent.pk, [])
        if not points:
            continue
        x, y, custom = gapped(points)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers" if len(points) <= 60 else "lines",
                "name": chart_text(agent_label(agent)),
                "x": x,
                "y": y,
                "customdata": custom,
                "connectgaps": False,
                "line": {"color": CHART_COLORS[index % len(CHART_COLORS)], "width": 2},
                "marker": {"size": 6},
                "hovertemplate": "%{y:.1f}% exact (%{customdata[0]:,} of %{customdata[1]:,})<extra>%{fullData.name}</extra>",
            }
        )
    layout = base_layout(
        xaxis=_day_axis([day for points in series.values() for day, _, _ in points]),
        yaxis={
            "title": {"text": "exact-match rate (%)"},
            "range": [0, 105],
            "gridcolor": "#e3e6eb",
            "ticksuffix": "%",
        },
        height=320,
    )
    # One version's point at a time: several versions often share a day.
    layout["hovermode"] = "closest"
    return {"data": data, "layout": layout}


# Bars of the tool page, by verdict: greens for exact, ambers for cosmetic, reds for damage.
VERDICT_COLORS = {
    "exact": "#2f855a",
    "newline_only": "#b7791f",
    "line_endings": "#d69e2e",
    "whitespace_only": "#975a16",
    "truncated": "#c53030",
    "elements_dropped": "#9b2c2c",
    "mutated": "#e53e3e",
    "mismatch": "#822727",
    "unverifiable": "#718096",
    "capture_truncated": "#4a5568",
    "pending": "#a0aec0",
}


def tool_figure(days: list[tuple[date, dict[str, int]]], rates: list[DayRate]) -> dict[str, Any]:
    """Plotly figure of one tool: its bulk arguments per day stacked by verdict (left axis), and the
    day's exact-match rate (right axis). `days` is [(day, {verdict: arguments})] oldest first."""
    data: list[dict[str, Any]] = []
    x = [day.isoformat() for day, _ in days]
    for verdict, color in VERDICT_COLORS.items():
        counts = [by_verdict.get(verdict, 0) for _, by_verdict in days]
        if not any(counts):
            continue
        data.append(
            {
                "type": "bar",
                "name": verdict.replace("_", " "),
                "x": x,
                "y": counts,
                "marker": {"color": color},
                "width": 0.8 * DAY_MS,  # a day wide, however far apart the days with calls are
                "hovertemplate": "%{y:,} %{fullData.name}<extra>%{x|%b %d}</extra>",
            }
        )
    if rates:
        rx, ry, custom = gapped(rates)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "exact-match rate",
                "x": rx,
                "y": ry,
                "customdata": custom,
                "yaxis": "y2",
                "connectgaps": False,
                "line": {"color": CHART_COLORS[0], "width": 2},
                "marker": {"size": 6},
                "hovertemplate": "%{y:.1f}% exact (%{customdata[0]:,} of %{customdata[1]:,})<extra></extra>",
            }
        )
    layout = base_layout(
        xaxis=_day_axis([day for day, _ in days]),
        yaxis={"title": {"text": "bulk arguments"}, "gridcolor": "#e3e6eb", "rangemode": "tozero"},
        height=320,
    )
    layout["barmode"] = "stack"
    layout["yaxis2"] = {
        "title": {"text": "exact-match rate (%)"},
        "overlaying": "y",
        "side": "right",
        "range": [0, 105],
        "tickvals": [0, 25, 50, 75, 100],
        "ticksuffix": "%",
        "showgrid": False,
    }
    # Below the axis: a verdict legend at the top would wrap over the bars on a phone.
    layout["legend"] = {"orientation": "h", "x": 0, "y": -0.3}
    layout["margin"] = {**layout["margin"], "r": 64, "b": 100}
    layout["height"] = 360
    layout["hovermode"] = "x"
    return {"data": data, "layout": layout}
