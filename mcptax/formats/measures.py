"""Arithmetic of the assembled calls: durations between logged times, shares of a turn's tokens."""

from __future__ import annotations

from datetime import datetime


def _parse_ts(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def duration_between(start: str | None, end: str | None) -> float | None:
    """Milliseconds from ``start`` to ``end`` (ISO 8601), None when either is missing or unreadable."""
    a, b = _parse_ts(start), _parse_ts(end)
    if a is None or b is None:
        return None
    try:
        return round((b - a).total_seconds() * 1000.0, 3)
    except TypeError:  # one naive, one aware
        return None


def split_proportionally(total: int, weights: list[int]) -> list[int]:
    """Integer shares of ``total`` proportional to ``weights`` that sum exactly to ``total``."""
    weight_sum = sum(weights)
    if not weights:
        return []
    if weight_sum <= 0:
        weights, weight_sum = [1] * len(weights), len(weights)
    exact = [total * w / weight_sum for w in weights]
    shares = [int(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_remainder[: total - sum(shares)]:
        shares[i] += 1
    return shares
