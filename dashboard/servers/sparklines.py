"""Overview sparklines: each server's change in fixed tax, every row drawn on one shared scale.

A row shows its last snapshots as the change from the first of them, so a flat line is no change
and the middle of the box is the starting point. The scale is the largest change any row shows,
so +142 tokens draws a small step and +937 a large one, instead of both filling their box.
"""

from __future__ import annotations

from django.db import connection
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from dashboard.servers.models import Snapshot

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


# Each server's newest snapshots through its (server, -first_seen) index, N rows a server: a
# window over every snapshot of every server would number all of them (25,000 at 50 x 500).
_LAST_TAXES_SQL = """
    SELECT s.server_id, s.fixed_tax_tokens
    FROM unnest(%s::bigint[]) AS ids(id)
    CROSS JOIN LATERAL (
        SELECT server_id, fixed_tax_tokens, first_seen, id FROM dashboard_snapshot
        WHERE server_id = ids.id ORDER BY first_seen DESC, id DESC LIMIT %s
    ) AS s
    ORDER BY s.server_id, s.first_seen, s.id
"""


def last_taxes(server_ids: list[int], points: int) -> dict[int, list[int]]:
    """The fixed tax of each server's last `points` snapshots, oldest first (one query)."""
    out: dict[int, list[int]] = {}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_LAST_TAXES_SQL, [server_ids, points])
            rows = cursor.fetchall()
    else:  # SQLite has no LATERAL; its embedded databases are small.
        rows = list(
            Snapshot.objects.filter(server_id__in=server_ids)
            .annotate(
                rank=Window(
                    RowNumber(),
                    partition_by=[F("server_id")],
                    order_by=[F("first_seen").desc(), F("pk").desc()],
                )
            )
            .filter(rank__lte=points)
            .order_by("server_id", "first_seen", "pk")
            .values_list("server_id", "fixed_tax_tokens")
        )
    for server_id, tax in rows:
        out.setdefault(server_id, []).append(tax)
    return out
