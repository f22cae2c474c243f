"""The agent page's chart: daily exact-match rate, one line per agent version (a Plotly dict drawn
by our static plotly.js, on the app's shared layout)."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from dashboard.servers.charts import base_layout, chart_text
from ingest.capture.models import Agent
from ingest.fidelity.selectors.agents import DayRate, agent_label
from ingest.fidelity.selectors.common import exact_rate

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
