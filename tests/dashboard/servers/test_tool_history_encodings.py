"""The tool page's history in the team's main encoding when snapshots were counted in another: a
snapshot that kept the team's encoding shows its figures and share in it, one that did not shows
its own encoding's, named beside (the figures come from each row's stored JSON, read only then)."""

from __future__ import annotations

import pytest

from dashboard.servers.models import Snapshot, SnapshotTool
from dashboard.servers.tool_history import tool_history
from tests.dashboard.factories import http_server, record, tool

pytestmark = pytest.mark.django_db

MAIN = "o200k_base"


def test_figures_and_shares_follow_the_teams_encoding_where_a_snapshot_kept_it(team):
    server = http_server(team, "files")
    first = record(server, [tool("write", "Write."), tool("read", "Read.")], "1.0")
    second = record(server, [tool("write", "Write a file, longer."), tool("read", "Read.")], "1.1")
    third = record(server, [tool("read", "Read.")], "1.2")
    assert {s.encoding for s in (first, second, third)} == {"cl100k_base"}
    # The second snapshot was also counted in the team's encoding; the first was not.
    SnapshotTool.objects.filter(snapshot=second, name="write").update(
        counts={MAIN: {"tokens": 40, "description_tokens": 7, "schema_tokens": 30}}
    )
    Snapshot.objects.filter(pk=second.pk).update(counts={"mcp": {MAIN: {"fixed_tax_tokens": 160}}})
    server.refresh_from_db()

    history = tool_history(server, "write", MAIN)

    assert [c.kind for c in history.changes] == ["removed", "changed", "added"]
    removed, changed, added = history.changes
    own = SnapshotTool.objects.get(snapshot=first, name="write")
    assert (added.figures.tokens, added.figures.encoding) == (own.tokens, "cl100k_base")
    assert added.share == round(100.0 * own.tokens / first.fixed_tax_tokens, 1)
    assert (changed.figures.tokens, changed.figures.description_tokens) == (40, 7)
    assert (changed.figures.schema_tokens, changed.figures.encoding) == (30, MAIN)
    assert changed.share == 25.0  # 40 of the snapshot's 160 in the team's encoding
    assert changed.delta is None  # another encoding than the figures before: no difference
    assert (removed.label, removed.figures, removed.delta) == ("1.2", None, -40)
    assert history.removed_in is removed and history.current is None and history.snapshots == 2


def test_the_current_snapshots_figures_in_the_teams_encoding(team):
    server = http_server(team, "files")
    only = record(server, [tool("write", "Write.")], "2.0")
    SnapshotTool.objects.filter(snapshot=only).update(
        counts={MAIN: {"tokens": 9, "description_tokens": 2, "schema_tokens": 5}}
    )
    Snapshot.objects.filter(pk=only.pk).update(tokens_by_encoding={MAIN: {"fixed_tax_tokens": 12}})
    server.refresh_from_db()
    history = tool_history(server, "write", MAIN)
    assert (history.current.tokens, history.current.encoding) == (9, MAIN)
    assert history.current_share == 75.0
    assert history.changes[0].label == "2.0" and history.changes[0].kind == "added"
