"""A snapshot's figures in every tracked encoding and profile, and recounting stored snapshots.

The poll counts a new snapshot once (never an unchanged one). When a team starts tracking another
encoding, its servers' current snapshots are recounted from their stored `tools/list` documents,
so the new figures show at once instead of after each server's next release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from dashboard.servers.models import McpServer, Snapshot, SnapshotTool
from dashboard.teams.models import Team
from mcptax import profiles, tokens


def tracked_encodings(team: Team) -> list[str]:
    """The team's tracked encodings that load here, main one first; the default when none does."""
    return tokens.available_encodings(team.tracked_encodings()) or [tokens.DEFAULT_ENCODING]


@dataclass
class Counted:
    """Every profile in every encoding (`counts`), each tool per encoding (`tool_counts`, in list
    order), and the `mcp` profile's report in the main encoding (the snapshot's own columns)."""

    encodings: list[str]
    report: tokens.TokenReport
    counts: dict[str, dict[str, dict[str, int]]]
    tool_counts: list[dict[str, dict[str, int]]]

    @property
    def tokens_by_encoding(self) -> dict[str, dict[str, int]]:
        return {
            name: {k: figures[k] for k in ("fixed_tax_tokens", "instructions_tokens")}
            for name, figures in self.counts["mcp"].items()
        }


def count(tools: list[dict[str, Any]], instructions: str, encodings: list[str], *, server: str) -> Counted:
    counted = profiles.matrix(tools, instructions, encodings, server=server)
    counts = {
        profile: {
            name: {
                "fixed_tax_tokens": r.fixed_tax_tokens,
                "instructions_tokens": r.instructions_tokens,
                "bytes": r.bytes,
            }
            for name, r in by_encoding.items()
        }
        for profile, by_encoding in counted.items()
    }
    tool_counts: list[dict[str, dict[str, int]]] = [{} for _ in tools]
    for name, r in counted["mcp"].items():
        for i, t in enumerate(r.tools):
            tool_counts[i][name] = {
                "tokens": t.tokens,
                "description_tokens": t.description_tokens,
                "schema_tokens": t.schema_tokens,
            }
    return Counted(encodings, counted["mcp"][encodings[0]], counts, tool_counts)


def recount(snapshot: Snapshot, encodings: list[str]) -> bool:
    """Add the figures of `encodings` that `snapshot` lacks, from its stored document (its own
    columns, counted in the encoding it was polled with, stay). True when something was added."""
    have = set((snapshot.counts or {}).get("mcp", {}))
    if set(encodings) <= have:
        return False
    counted = count(snapshot.document.raw, snapshot.instructions, encodings, server=snapshot.server.name)
    tools = list(snapshot.tools.order_by("position"))
    with transaction.atomic():
        merged = {
            profile: {**(snapshot.counts or {}).get(profile, {}), **figures}
            for profile, figures in counted.counts.items()
        }
        Snapshot.objects.filter(pk=snapshot.pk).update(
            counts=merged,
            tokens_by_encoding={**(snapshot.tokens_by_encoding or {}), **counted.tokens_by_encoding},
        )
        for tool in tools:
            if tool.position < len(counted.tool_counts):
                tool.counts = {**(tool.counts or {}), **counted.tool_counts[tool.position]}
        SnapshotTool.objects.bulk_update(tools, ["counts"])
    return True


def recount_current(team: Team) -> int:
    """Recount the current snapshot of each of `team`'s servers in its tracked encodings; returns
    how many snapshots gained figures."""
    encodings = tracked_encodings(team)
    snapshots = Snapshot.objects.filter(
        pk__in=McpServer.objects.filter(team=team).values("current_snapshot")
    ).select_related("document", "server")
    return sum(recount(snapshot, encodings) for snapshot in snapshots)
