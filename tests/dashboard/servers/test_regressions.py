"""The regressions page and the overview's regression panel and sparklines.

Snapshots go through the real `record_snapshot` path; tool tokens are counted with tiktoken
directly (tests.dashboard.factories), never with the product's counting code.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.budgets import evaluate_server
from dashboard.alerts.models import Budget, Level, Measure
from dashboard.servers.models import Stack
from dashboard.servers.sparklines import delta_points, shared_scale
from tests.dashboard.factories import (
    http_server,
    independent_tax,
    independent_tool_tokens,
    page_text,
    record,
    tool,
)

pytestmark = pytest.mark.django_db

BASE = [tool("read", "Read a file."), tool("write", "Write a file.")]
GROWN = [
    tool("read", "Read a file. " + "It reads the whole file, line by line, and returns it. " * 8),
    tool("write", "Write a file."),
    tool(
        "search", "Search files for a pattern.", {"pattern": {"type": "string"}, "root": {"type": "string"}}
    ),
]
SHRUNK = [tool("read", "Read a file.")]


def _row(html: str, snapshot_pk: int) -> str:
    match = re.search(rf'<tr id="regression-{snapshot_pk}".*?</tr>', html, re.S)
    assert match, f"no regression row for snapshot {snapshot_pk}"
    return match.group(0)


def test_regressions_list_every_change_newest_first_with_the_tools_that_caused_it(alice_client, team):
    Budget.objects.create(team=team, measure=Measure.RELEASE_GROWTH_PCT, level=Level.ERROR, limit=25)
    files = http_server(team, "files")
    docs = http_server(team, "docs")
    now = timezone.now()
    first = record(files, BASE, "1.0", when=now - timedelta(days=3))
    grown = record(files, GROWN, "1.1", when=now - timedelta(days=2))
    evaluate_server(files)  # what a poll's snapshot_recorded does
    record(docs, BASE, "2.0", when=now - timedelta(days=2))
    shrunk = record(docs, SHRUNK, "2.1", when=now - timedelta(days=1))
    evaluate_server(docs)

    html = alice_client.get(reverse("regressions", args=[team.slug])).content.decode()
    rows = re.findall(r'<tr id="regression-(\d+)"', html)
    # Only snapshots that changed a tax, newest first, across servers; first snapshots are not changes.
    assert rows == [str(shrunk.pk), str(grown.pk)]

    before, after = independent_tool_tokens(BASE), independent_tool_tokens(GROWN)
    row = page_text(_row(html, grown.pk))
    delta = independent_tax(GROWN) - independent_tax(BASE)
    assert f"+{delta:,} tokens" in row
    assert "release 1.0 → 1.1" in row
    assert f"added search +{after['search']:,}" in row
    assert f"grown read +{after['read'] - before['read']:,}" in row
    assert "write" not in row, "an unchanged tool is not among the causes"
    assert "error: Growth per release (%)" in row, "the growth alert it raised is shown"
    assert f"?a={first.pk}&b={grown.pk}" in _row(html, grown.pk), "links to the diff of those two snapshots"

    shrink_row = page_text(_row(html, shrunk.pk))
    assert f"removed write −{before['write']:,}" in shrink_row
    assert "none" in shrink_row  # no alert for a shrink


def test_regression_filters_by_server_stack_direction_and_period(alice_client, team):
    files, docs = http_server(team, "files"), http_server(team, "docs")
    now = timezone.now()
    record(files, BASE, "1.0", when=now - timedelta(days=60))
    old = record(files, GROWN, "1.1", when=now - timedelta(days=50))
    record(docs, BASE, "2.0", when=now - timedelta(days=2))
    shrunk = record(docs, SHRUNK, "2.1", when=now - timedelta(days=1))
    stack = Stack.objects.create(team=team, name="agent")
    stack.servers.add(files)
    url = reverse("regressions", args=[team.slug])

    def shown(**params):
        html = alice_client.get(url, params).content.decode()
        return [int(pk) for pk in re.findall(r'<tr id="regression-(\d+)"', html)]

    assert shown() == [shrunk.pk], "the default period (30 days) leaves out the 50-day-old change"
    assert shown(period="90d") == [shrunk.pk, old.pk]
    assert shown(period="90d", server=str(files.code)) == [old.pk]
    assert shown(period="90d", stack=str(stack.code)) == [old.pk]
    assert shown(period="all", direction="grew") == [old.pk]
    assert shown(period="all", direction="shrank") == [shrunk.pk]
    html = alice_client.get(url, {"server": str(files.code)}).content.decode()
    assert "No change matches these filters" in html


def test_regressions_paginate(alice_client, team):
    server = http_server(team, "flappy")
    now = timezone.now()
    for i in range(27):
        record(server, BASE if i % 2 == 0 else GROWN, f"1.{i}", when=now - timedelta(hours=27 - i))
    url = reverse("regressions", args=[team.slug])
    first = alice_client.get(url).content.decode()
    second = alice_client.get(url, {"page": 2}).content.decode()
    assert len(re.findall(r'<tr id="regression-', first)) == 25
    assert len(re.findall(r'<tr id="regression-', second)) == 1
    assert "page 1 of 2 (26 changes)" in first


def test_overview_panel_shows_the_biggest_growth_of_the_week(alice_client, team):
    files, docs = http_server(team, "files"), http_server(team, "docs")
    now = timezone.now()
    record(files, BASE, "1.0", when=now - timedelta(days=3))
    record(files, GROWN, "1.1", when=now - timedelta(days=2))
    record(docs, SHRUNK, "2.0", when=now - timedelta(days=10))
    record(docs, BASE, "2.1", when=now - timedelta(days=9))  # grew, but not this week
    html = alice_client.get(reverse("team_overview", args=[team.slug])).content.decode()
    panel = page_text(
        re.search(r'<section class="card" id="regressions-panel">.*?</section>', html, re.S).group(0)
    )
    delta = independent_tax(GROWN) - independent_tax(BASE)
    assert f"+{delta:,} tokens files 1.1" in panel
    assert "docs" not in panel


def test_sparklines_share_one_scale():
    small, large = [1000, 1000, 1142], [2000, 2937]
    scale = shared_scale([small, large])
    assert scale == 937
    small_y = float(delta_points(small, scale).split()[-1].split(",")[1])
    large_y = float(delta_points(large, scale).split()[-1].split(",")[1])
    # The box is 28 high, the baseline at 14, 12 units of reach: +937 reaches the top, +142 a fraction.
    assert large_y == pytest.approx(2.0)
    assert small_y == pytest.approx(14 - 12 * 142 / 937, abs=0.05)
    assert delta_points([5, 5], 0) == "2.0,14.0 118.0,14.0"


def test_overview_release_delta_is_a_visible_link_to_the_diff(alice_client, team):
    files = http_server(team, "files")
    now = timezone.now()
    a = record(files, BASE, "1.0", when=now - timedelta(days=2))
    b = record(files, GROWN, "1.1", when=now - timedelta(days=1))
    html = alice_client.get(reverse("team_overview", args=[team.slug])).content.decode()
    assert re.search(rf'<a class="delta" href="[^"]*\?a={a.pk}&b={b.pk}"', html)
