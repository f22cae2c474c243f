"""Overview sparklines: each server's change in fixed tax, every row drawn on one shared scale.

A row shows its last snapshots as the change from the first of them, so a flat line is no change
and the middle of the box is the starting point. The scale is the largest change any row shows,
so +142 tokens draws a small step and +937 a large one, instead of both filling their box.
"""

from __future__ import annotations

WIDTH, HEIGHT, PAD = 120, 28, 2


def shared_scale(series: list[list[int]]) -> int:
    """The largest distance from its first value that any series reaches (0 when all are flat)."""
    return max((abs(v - s[0]) for s in series if s for v in s), default=0)


def delta_points(
    values: list[int], scale: int, width: int = WIDTH, height: int = HEIGHT, pad: int = PAD
) -> str:
    """SVG polyline points for values oldest first, as changes from the first value on ±`scale`."""
    if not values:
        return ""
    if len(values) == 1:
        values = values * 2
    middle = height / 2
    reach = middle - pad
    step = (width - 2 * pad) / (len(values) - 1)
    points = []
    for i, v in enumerate(values):
        y = middle if scale == 0 else middle - reach * (v - values[0]) / scale
        points.append(f"{pad + i * step:.1f},{y:.1f}")
    return " ".join(points)
