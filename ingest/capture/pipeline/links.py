"""Pairing a proxy capture with the transcript's record of the same call (the Claude Code
tool-use id): both rows point at each other, and the transcript's copy no longer counts in the
rollups (the proxy's, with the exact bytes sent, does)."""

from __future__ import annotations

from typing import Any

from dashboard.teams.models import Team
from ingest.capture.models import ToolCall
from mcptax.formats.records import PROXY_FORMATS


def link_calls(team: Team, rows: list[ToolCall], *, written: bool) -> None:
    """Link the batch's new ``rows`` (ids set) with their counterparts not linked yet.

    The batch's rows are changed in memory; when ``written`` (they are in the table already) they
    are updated too, else they are about to be written as they are. Other rows are updated.
    """
    proxy = {
        r.claudecode_tool_use_id: r.pk
        for r in rows
        if r.source_format in PROXY_FORMATS and r.claudecode_tool_use_id
    }
    transcript = {
        r.client_call_id: r.pk for r in rows if r.source_format == "claude-code" and r.client_call_id
    }
    pairs: dict[int, int] = {}  # transcript pk -> proxy pk
    if proxy:
        for pk, tool_use_id in (
            ToolCall.objects.filter(
                team=team, source_format="claude-code", client_call_id__in=list(proxy), linked_call=None
            )
            .order_by("pk")
            .values_list("pk", "client_call_id")
        ):
            pairs.setdefault(pk, proxy[tool_use_id])
    if transcript:
        for pk, tool_use_id in (
            ToolCall.objects.filter(
                team=team,
                source_format__in=PROXY_FORMATS,
                claudecode_tool_use_id__in=list(transcript),
                linked_call=None,
            )
            .order_by("pk")
            .values_list("pk", "claudecode_tool_use_id")
        ):
            if transcript[tool_use_id] not in pairs:
                pairs[transcript[tool_use_id]] = pk
    batch = {r.pk: r for r in rows}

    def change(pk: int, **fields: Any) -> None:
        row = batch.get(pk)
        if row is not None:
            for name, value in fields.items():
                setattr(row, name, value)
        if row is None or written:
            ToolCall.objects.filter(pk=pk).update(**fields)

    used_proxies: set[int] = set()
    for transcript_pk, proxy_pk in pairs.items():
        if proxy_pk in used_proxies:
            continue
        used_proxies.add(proxy_pk)
        change(transcript_pk, linked_call_id=proxy_pk, counts_in_rollups=False)
        change(proxy_pk, linked_call_id=transcript_pk)
