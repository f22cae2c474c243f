"""Plotly figures as plain dicts (data + layout), embedded as JSON and drawn by our static plotly.js.

Plain dicts rather than plotly.graph_objects: the page needs a few hundred points, not Python-side
validation, and a dict serializes without plotly's template (which would double the payload).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from dashboard.servers.selectors import AlertMark, HistoryPoint

AXES = ("date", "release")
MAX_RELEASE_TICKS = 40
# The narrowest date axis drawn: one day, so ticks read as dates and hours.
MIN_DATE_SPAN = timedelta(days=1)
COLORS = {
    "tax": "#2f5fd0",
    "release": "#151b2c",
    "warning": "#b7791f",
    "error": "#c53030",
    "grid": "#e3e6eb",
}
LIMIT_MEASURE = "fixed_tax_tokens"


def chart_text(value: str) -> str:
    """A user-controlled string (a release's serverInfo.version, an alert message, an agent name)
    made safe for any Plotly text: Plotly renders names, labels, ticks and hover text as a subset
    of HTML (<a href>, <b>, <br>), so an unescaped version could put a link into our page. Plotly
    turns the entities back into the literal characters when it draws."""
    return html.escape(value, quote=False)


def _x(points: list[HistoryPoint], axis: str) -> list[Any]:
    return [p.first_seen.isoformat() if axis == "date" else i for i, p in enumerate(points)]


def _nearest_index(points: list[HistoryPoint], alert: AlertMark) -> int:
    if alert.snapshot_id is not None:
        for i, p in enumerate(points):
            if p.pk == alert.snapshot_id:
                return i
    # The snapshot current when the alert opened.
    index = 0
    for i, p in enumerate(points):
        if p.first_seen <= alert.opened_at:
            index = i
    return index


def history_figure(
    points: list[HistoryPoint],
    alerts: list[AlertMark],
    *,
    axis: str,
    encoding: str,
    release_url: Callable[[HistoryPoint], str],
    snapshot_url: Callable[[HistoryPoint], str],
) -> dict[str, Any]:
    """Fixed tax over time (x by date or by snapshot order with release ticks), with release
    markers linking to their diff, the budget line from each snapshot's stored limit, and alerts."""
    axis = axis if axis in AXES else "date"
    xs = _x(points, axis)
    releases = [(i, p) for i, p in enumerate(points) if p.is_release]
    data = [_tax_trace(points, xs, axis, snapshot_url)]
    budget = _budget_trace(points, xs, axis)
    if budget:
        data.append(budget)
    if alerts and points:
        data.append(_alert_trace(points, alerts, axis))
    # Last, so a release marker sits on top of an alert at the same point and takes the click.
    if releases:
        data.append(_release_trace(releases, xs, release_url))
    layout = base_layout(
        xaxis=_history_xaxis(points, releases, axis),
        yaxis={
            "title": {"text": f"tokens ({encoding})"},
            "rangemode": "tozero",
            "gridcolor": COLORS["grid"],
            "tickformat": ",d",
        },
        height=340,
    )
    # "x": a click on a release gets every trace's point there, the release's link among them.
    layout["hovermode"] = "x"
    return {"data": data, "layout": layout}


def _tax_trace(
    points: list[HistoryPoint], xs: list[Any], axis: str, snapshot_url: Callable[[HistoryPoint], str]
) -> dict[str, Any]:
    line_x, line_y = list(xs), [p.tokens for p in points]
    if axis == "date" and points:
        # A snapshot holds until last seen; extend the step so the current level is visible.
        line_x.append(points[-1].last_seen.isoformat())
        line_y.append(points[-1].tokens)
    return {
        "type": "scatter",
        "mode": "lines+markers" if len(points) <= 60 else "lines",
        "name": "Fixed tax",
        "x": line_x,
        "y": line_y,
        "line": {"color": COLORS["tax"], "shape": "hv" if axis == "date" else "linear", "width": 2},
        "marker": {"size": 5},
        "customdata": [[chart_text(p.label), p.tool_count, snapshot_url(p)] for p in points]
        + (
            [[chart_text(points[-1].label), points[-1].tool_count, snapshot_url(points[-1])]]
            if len(line_x) > len(points)
            else []
        ),
        "hovertemplate": "%{y:,} tokens<br>%{customdata[0]} · %{customdata[1]} tools<extra></extra>",
    }


def _budget_trace(points: list[HistoryPoint], xs: list[Any], axis: str) -> dict[str, Any] | None:
    limited: list[tuple[int, HistoryPoint, dict[str, Any]]] = [
        (i, p, lim)
        for i, p in enumerate(points)
        if isinstance(lim := p.budget_checks.get(LIMIT_MEASURE), dict) and lim.get("limit") is not None
    ]
    if not limited:
        return None
    level = limited[-1][2].get("level") or "warning"
    budget_x = [xs[i] for i, _, _ in limited]
    budget_y = [lim["limit"] for _, _, lim in limited]
    if axis == "date" and limited[-1][0] == len(points) - 1:
        budget_x.append(points[-1].last_seen.isoformat())
        budget_y.append(budget_y[-1])
    return {
        "type": "scatter",
        "mode": "lines",
        "name": f"Budget ({level})",
        "x": budget_x,
        "y": budget_y,
        "line": {"color": COLORS.get(level, COLORS["warning"]), "dash": "dash", "shape": "hv", "width": 1.5},
        "hovertemplate": "budget %{y:,} tokens<extra></extra>",
    }


def _alert_trace(points: list[HistoryPoint], alerts: list[AlertMark], axis: str) -> dict[str, Any]:
    at = [_nearest_index(points, a) for a in alerts]
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "Alert",
        "x": [a.opened_at.isoformat() if axis == "date" else i for a, i in zip(alerts, at, strict=True)],
        "y": [points[i].tokens for i in at],
        "marker": {
            "symbol": "x",
            "size": 12,
            "color": [COLORS.get(a.level, COLORS["error"]) for a in alerts],
            "line": {"width": 2},
        },
        "text": [chart_text(a.message[:200]) for a in alerts],
        "hovertemplate": "%{text}<extra>alert</extra>",
    }


def _release_trace(
    releases: list[tuple[int, HistoryPoint]], xs: list[Any], release_url: Callable[[HistoryPoint], str]
) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers+text",
        "name": "Release",
        "x": [xs[i] for i, _ in releases],
        "y": [p.tokens for _, p in releases],
        "text": [chart_text(p.label) for _, p in releases],
        "textposition": "top center",
        "textfont": {"size": 11, "color": COLORS["release"]},
        "marker": {"symbol": "diamond", "size": 11, "color": COLORS["release"]},
        "customdata": [[release_url(p), p.delta if p.delta is not None else 0] for _, p in releases],
        "hovertemplate": "release %{text}: %{y:,} tokens (%{customdata[1]:+,})"
        "<br>click for the diff<extra></extra>",
    }


def _history_xaxis(
    points: list[HistoryPoint], releases: list[tuple[int, HistoryPoint]], axis: str
) -> dict[str, Any]:
    xaxis: dict[str, Any] = {"gridcolor": COLORS["grid"], "zeroline": False}
    if axis == "date":
        xaxis.update(type="date", title={"text": "date"})
        if points and points[-1].last_seen - points[0].first_seen < MIN_DATE_SPAN:
            # A first snapshot (or a few within minutes): plotly would zoom to milliseconds and tick
            # "15:31:19.9665"; show the day around it instead.
            middle = points[0].first_seen + (points[-1].last_seen - points[0].first_seen) / 2
            xaxis["range"] = [
                (middle - MIN_DATE_SPAN / 2).isoformat(),
                (middle + MIN_DATE_SPAN / 2).isoformat(),
            ]
        return xaxis
    ticks = releases if releases else list(enumerate(points))
    if len(ticks) > MAX_RELEASE_TICKS:
        step = -(-len(ticks) // MAX_RELEASE_TICKS)
        ticks = ticks[::step]
    xaxis.update(
        type="linear",
        title={"text": "release (snapshots in order)"},
        tickmode="array",
        tickvals=[i for i, _ in ticks],
        ticktext=[chart_text(p.label) for _, p in ticks],
        range=[-0.5, max(len(points) - 0.5, 0.5)],
    )
    return xaxis


def base_layout(*, xaxis: dict[str, Any], yaxis: dict[str, Any], height: int = 300) -> dict[str, Any]:
    """The layout every chart of the app shares (white card, system font, legend on top); callers
    add what is particular to their chart (hovermode, axis ranges)."""
    return {
        "height": height,
        "margin": {"l": 64, "r": 20, "t": 30, "b": 50},
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        "font": {"family": "system-ui, sans-serif", "size": 12, "color": "#1d2330"},
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": 1.12},
        "xaxis": xaxis,
        "yaxis": yaxis,
    }
