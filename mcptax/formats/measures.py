"""Arithmetic of the assembled calls: durations between logged times, shares of a turn's tokens."""

from __future__ import annotations

from datetime import datetime

from mcptax.formats.records import utf8
from mcptax.tokens import count as count_tokens


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


def turn_shares(
    recorded: int | None, inputs: dict[str, str], *, check_against_inputs: bool
) -> tuple[int | None, dict[str, int], bool]:
    """A turn's output tokens, each tool call's share of them, and whether they are estimated.

    ``inputs`` holds each call's argument text (compact JSON), by call id, in order. The recorded
    figure is split in proportion to the argument bytes. With ``check_against_inputs`` (Claude
    Code, whose copies of a message may all carry a streaming-start figure), a figure below the
    cl100k tokens of the tool inputs the turn wrote cannot be right: those counted tokens replace
    it, each call keeping its own, and the result is marked estimated.
    """
    if recorded is None:
        return None, {}, False
    sizes = [len(utf8(text)) for text in inputs.values()]
    # A token is at least one byte, so a figure of at least the bytes needs no counting.
    if check_against_inputs and recorded < sum(sizes):
        counted = {call_id: count_tokens(text) for call_id, text in inputs.items()}
        if recorded < sum(counted.values()):
            return sum(counted.values()), counted, True
    return recorded, dict(zip(inputs, split_proportionally(recorded, sizes), strict=True)), False
