"""The release diff: its page on real snapshots and the side-by-side folding."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.servers import diff as diff_mod
from dashboard.servers.models import Snapshot
from tests.dashboard.factories import http_server, independent_tax, independent_tool_tokens, record, tool

pytestmark = pytest.mark.django_db


def as_text(segments: list[diff_mod.Segment]) -> dict[str, Any]:
    """The two sides of an inline diff as plain strings."""
    return {
        "before": "".join(s.text for s in segments if s.tag != "ins"),
        "after": "".join(s.text for s in segments if s.tag != "del"),
    }


@pytest.mark.slow
def test_release_diff_of_the_grown_release(alice_client, team, polled_example_servers):
    sprawl = polled_example_servers["files-sprawl"]
    old = Snapshot.objects.get(server=sprawl, server_version="1.4.0")
    new = sprawl.current_snapshot
    response = alice_client.get(
        reverse("snapshot_diff", args=[team.slug, sprawl.code]), {"a": old.pk, "b": new.pk}
    )
    assert response.status_code == 200
    diff = response.context["diff"]
    assert {c.name for c in diff.added} == {
        "compare_files",
        "compute_file_checksum",
        "get_directory_tree_summary",
        "find_duplicate_files",
    }
    assert not diff.removed and not diff.changed
    assert diff.delta == new.fixed_tax_tokens - old.fixed_tax_tokens
    # Each added tool costs what tiktoken counts for its visible JSON; the total change and the
    # list overhead change follow the formula applied to both stored tool lists.
    after_tools = independent_tool_tokens(new.tools_raw)
    added = {c.name: c.after.tokens for c in diff.added}
    assert added == {name: after_tools[name] for name in added}
    assert diff.tools_delta == sum(added.values())
    assert diff.delta == independent_tax(new.tools_raw) - independent_tax(old.tools_raw)
    before_tools = independent_tool_tokens(old.tools_raw)
    overhead = {
        s.pk: independent_tax(s.tools_raw) - sum(tools.values())
        for s, tools in ((old, before_tools), (new, after_tools))
    }
    assert diff.overhead_delta == overhead[new.pk] - overhead[old.pk]
    html = response.content.decode()
    for change in diff.added:
        assert f"+{change.after.tokens:,}" in html
    statuses = {(fc.finding["kind"], fc.status) for fc in diff.findings}
    assert ("large_surface", "kept") in statuses
    # The default diff (no parameters) is the current snapshot against the one before it.
    default = alice_client.get(reverse("snapshot_diff", args=[team.slug, sprawl.code]))
    assert (default.context["a"].pk, default.context["b"].pk) == (old.pk, new.pk)


def test_diff_shows_changed_description_and_schema(alice_client, team):
    server = http_server(team, "changing")
    before = [
        tool("search", "Search files for a pattern.", {"pattern": {"type": "string"}}),
        tool("gone", "Old tool."),
        tool("same", "Unchanged."),
    ]
    after = [
        tool(
            "search",
            "Search files for a regular expression pattern, recursively.",
            {"pattern": {"type": "string"}, "max_hits": {"type": "integer", "description": "cap"}},
        ),
        tool("same", "Unchanged."),
        tool("fresh", "New tool."),
    ]
    a = record(server, before, "1.0", when=timezone.now() - timedelta(days=1))
    b = record(server, after, "1.1")
    response = alice_client.get(
        reverse("snapshot_diff", args=[team.slug, server.code]), {"a": a.pk, "b": b.pk}
    )
    diff = response.context["diff"]
    assert [c.name for c in diff.added] == ["fresh"]
    assert [c.name for c in diff.removed] == ["gone"]
    assert [c.name for c in diff.changed] == ["search"]
    assert diff.unchanged_count == 1
    change = diff.changed[0]
    search_before = independent_tool_tokens(before)["search"]
    search_after = independent_tool_tokens(after)["search"]
    assert (change.before.tokens, change.after.tokens) == (search_before, search_after)
    assert change.delta == search_after - search_before > 0
    assert as_text(change.description_diff) == {
        "before": "Search files for a pattern.",
        "after": "Search files for a regular expression pattern, recursively.",
    }
    html = response.content.decode()
    assert "<ins>regular expression </ins>" in html
    assert "&quot;max_hits&quot;: {" in html and 'class="insert"' in html
    # Per-tool changes, counted independently: fresh arrives, gone leaves, search grows.
    fresh = independent_tool_tokens(after)["fresh"]
    gone = independent_tool_tokens(before)["gone"]
    assert diff.tools_delta == fresh - gone + (search_after - search_before)
    assert diff.delta == independent_tax(after) - independent_tax(before)
    overhead_before = independent_tax(before) - sum(independent_tool_tokens(before).values())
    overhead_after = independent_tax(after) - sum(independent_tool_tokens(after).values())
    assert diff.overhead_delta == overhead_after - overhead_before


def test_side_by_side_folds_long_unchanged_runs():
    before = [f"line {i}" for i in range(30)]
    after = list(before)
    after[15] = "changed"
    rows = diff_mod.side_by_side(before, after)
    tags = [r.tag for r in rows]
    assert tags.count("replace") == 1
    assert [r.count for r in rows if r.tag == "skip"] == [12, 11]
    assert len(rows) == 3 + 1 + 3 + 2  # context, change, context, two folds
