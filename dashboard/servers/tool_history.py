"""One tool's schema tokens across its server's snapshots: what the tool page shows of the fixed tax.

Tools are matched by name from snapshot to snapshot, as the diff and the per-tool breakdown match
them. Figures are in the team's main encoding where the snapshot was counted in it (each
`SnapshotTool` keeps every tracked encoding), else in the snapshot's own encoding, named beside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dashboard.servers.models import McpServer, Snapshot, SnapshotTool


@dataclass
class ToolFigures:
    tokens: int
    description_tokens: int
    schema_tokens: int
    encoding: str


@dataclass
class ToolChange:
    """A snapshot in which the tool appeared, changed or went away (newest first on the page)."""

    snapshot_id: int
    previous_id: int | None
    label: str
    first_seen: datetime
    is_release: bool
    kind: str  # added | changed | removed | returned
    figures: ToolFigures | None  # None: the tool is not in this snapshot
    delta: int | None  # tokens against the tool's previous figures (same encoding), None if unknown
    share: float | None  # of the snapshot's fixed tax in that encoding, 0..100


@dataclass
class ToolHistory:
    name: str
    encoding: str  # the team's main encoding
    current: ToolFigures | None  # in the server's current snapshot; None: not listed there
    current_share: float | None
    changes: list[ToolChange] = field(default_factory=list)  # newest first
    snapshots: int = 0  # how many snapshots list the tool
    removed_in: ToolChange | None = None  # set when the tool was listed once and is gone now

    @property
    def ever_listed(self) -> bool:
        return self.snapshots > 0


@dataclass
class _SnapshotRow:
    """What the history reads of a snapshot: its columns as plain values (hundreds of model
    instances cost more than the query), the JSON figures only where another encoding needs them."""

    pk: int
    previous_id: int | None
    first_seen: datetime
    server_version: str
    sha256: str
    is_release: bool
    encoding: str
    fixed_tax_tokens: int
    counts: dict[str, Any] | None = None
    tokens_by_encoding: dict[str, Any] | None = None

    def model(self) -> Snapshot:
        """An unsaved Snapshot of these values, for its own rules (label, figure): built only for
        the rows the page shows."""
        return Snapshot(
            pk=self.pk,
            server_version=self.server_version,
            sha256=self.sha256,
            encoding=self.encoding,
            fixed_tax_tokens=self.fixed_tax_tokens,
            counts=self.counts,
            tokens_by_encoding=self.tokens_by_encoding,
        )


@dataclass
class _ToolRow:
    sha256: str
    tokens: int
    description_tokens: int
    schema_tokens: int
    counts: dict[str, Any] | None = None  # loaded where the snapshot's encoding is another


# _SnapshotRow's fields, in order, up to the JSON ones.
_SNAPSHOT_COLUMNS = (
    "pk",
    "previous_id",
    "first_seen",
    "server_version",
    "sha256",
    "is_release",
    "encoding",
    "fixed_tax_tokens",
)
_TOOL_COLUMNS = ("sha256", "tokens", "description_tokens", "schema_tokens")


def _figures(tool: _ToolRow, snapshot_encoding: str, encoding: str) -> ToolFigures:
    if encoding != snapshot_encoding:
        other = (tool.counts or {}).get(encoding)
        if other and "tokens" in other:
            return ToolFigures(
                int(other["tokens"]),
                int(other.get("description_tokens", 0)),
                int(other.get("schema_tokens", 0)),
                encoding,
            )
    return ToolFigures(tool.tokens, tool.description_tokens, tool.schema_tokens, snapshot_encoding)


def _share(tokens: int, snapshot: Snapshot, encoding: str) -> float | None:
    total = snapshot.figure(encoding)
    return round(100.0 * tokens / total, 1) if total else None


def _rows(server: McpServer, name: str, encoding: str) -> tuple[list[_SnapshotRow], dict[int, _ToolRow]]:
    """The server's snapshots, oldest first, and the tool's row in each that lists it (two
    queries; two more, for their JSON figures, when some snapshots were counted in another
    encoding than ``encoding``)."""
    snapshots = [
        _SnapshotRow(*row)
        for row in Snapshot.objects.filter(server=server)
        .order_by("first_seen", "pk")
        .values_list(*_SNAPSHOT_COLUMNS)
    ]
    listing = SnapshotTool.objects.filter(snapshot__server=server, name=name).order_by(
        "snapshot_id", "position"
    )
    tools = {row[0]: _ToolRow(*row[1:]) for row in listing.values_list("snapshot_id", *_TOOL_COLUMNS)}
    other = {row.pk: row for row in snapshots if row.encoding != encoding}
    if other:
        for pk, counts, by_encoding in Snapshot.objects.filter(pk__in=other).values_list(
            "pk", "counts", "tokens_by_encoding"
        ):
            other[pk].counts, other[pk].tokens_by_encoding = counts, by_encoding
        for snapshot_id, counts in listing.filter(snapshot_id__in=other).values_list("snapshot_id", "counts"):
            tools[snapshot_id].counts = counts
    return snapshots, tools


def tool_history(server: McpServer, name: str, encoding: str) -> ToolHistory:
    """The tool's figures in every snapshot of `server` where they changed (`_rows`' queries)."""
    snapshots, tools = _rows(server, name, encoding)
    history = ToolHistory(name=name, encoding=encoding, current=None, current_share=None)
    before: _ToolRow | None = None
    before_figures: ToolFigures | None = None
    seen = False
    for snapshot in snapshots:
        tool = tools.get(snapshot.pk)
        figures = _figures(tool, snapshot.encoding, encoding) if tool is not None else None
        kind = ""
        if tool is not None and before is None:
            kind = "returned" if seen else "added"
        elif tool is None and before is not None:
            kind = "removed"
        elif tool is not None and before is not None and tool.sha256 != before.sha256:
            kind = "changed"
        if kind:
            delta = None
            if (
                figures is not None
                and before_figures is not None
                and figures.encoding == before_figures.encoding
            ):
                delta = figures.tokens - before_figures.tokens
            elif figures is None and before_figures is not None:
                delta = -before_figures.tokens
            elif figures is not None and kind == "added":
                delta = figures.tokens
            shown = snapshot.model()
            history.changes.append(
                ToolChange(
                    snapshot.pk,
                    snapshot.previous_id,
                    shown.label,
                    snapshot.first_seen,
                    snapshot.is_release,
                    kind,
                    figures,
                    delta,
                    _share(figures.tokens, shown, figures.encoding) if figures else None,
                )
            )
        if tool is not None:
            seen = True
            history.snapshots += 1
            before_figures = figures
        before = tool
    history.changes.reverse()
    current_id = server.current_snapshot_id
    current_tool = tools.get(current_id) if current_id is not None else None
    if current_tool is not None:
        current = next(s for s in snapshots if s.pk == current_id)
        history.current = _figures(current_tool, current.encoding, encoding)
        history.current_share = _share(history.current.tokens, current.model(), history.current.encoding)
    elif history.changes and history.changes[0].kind == "removed":
        history.removed_in = history.changes[0]
    return history
