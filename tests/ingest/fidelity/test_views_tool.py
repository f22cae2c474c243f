"""The tool page: one tool of one server, its schema tokens release by release, its bulk arguments'
verdicts per day, its calls and callers, its open alerts; who may see it; its empty states; and the
links to it from the alerts, server, diff, regressions and calls pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from dashboard.alerts.budgets import evaluate_server
from dashboard.alerts.models import Alert, Budget, Level, Measure
from dashboard.teams.models import Membership
from ingest.capture.models import ToolCall
from tests.dashboard.factories import http_server, independent_tool_tokens, page_text, record, tool
from tests.helpers import sha
from tests.ingest.capture.logs import EnvelopeLog
from tests.ingest.fidelity.traffic import ingest, numbered_doc

pytestmark = pytest.mark.django_db

DOC = numbered_doc(1)
WRITE_1 = tool("write", "Write a file.", {"target": {"type": "string"}, "content": {"type": "string"}})
WRITE_2 = tool(
    "write",
    "Write a file: the whole text, or a path to copy it from.",
    {"target": {"type": "string"}, "content": {"type": "string"}, "path": {"type": "string"}},
)
READ = tool("read", "Read a file.")
HELP = tool("help", "Say what the other tools do.")


def _tool_url(team, server, name, **params):
    url = reverse("fidelity_tool", args=[team.slug, server.code, name])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def _stat(html: str, stat_id: str) -> str:
    found = re.search(rf'id="{stat_id}">(.*?)</div>', html, re.S)
    assert found, f"no {stat_id} on the page"
    return page_text(found.group(1)).strip()


@pytest.fixture
def lean(team, tmp_path: Path):
    """files-lean with two releases of `write`, and a log of its calls by two agents."""
    server = http_server(team, "files-lean")
    record(server, [WRITE_1, READ, HELP], "1.0")
    record(server, [WRITE_2, READ, HELP], "1.1")
    claude = EnvelopeLog(session="s1", label="files-lean", client="claude-code").initialize()
    claude.call("write", {"target": "a.md", "content": DOC, "expected_sha256": sha(DOC)})  # exact
    claude.call("write", {"target": "b.md", "content": DOC[:700], "expected_sha256": sha(DOC)})  # truncated
    claude.call("write", {"target": "c.md", "content": DOC[:-1], "expected_sha256": sha(DOC)})  # newline only
    claude.call("write", {"target": "d.md", "path": "a.md"})  # by reference
    claude.call("read", {"path": "a.md"})  # another tool: not on this page
    ingest(team, claude, tmp_path, "claude.jsonl")
    codex = EnvelopeLog(session="s2", label="files-lean", client="codex").initialize("0.46.0")
    codex.call("write", {"target": "e.md", "content": DOC, "expected_sha256": sha(DOC)})  # exact
    ingest(team, codex, tmp_path, "codex.jsonl")
    return server


def test_tool_page_shows_tokens_per_release_fidelity_calls_and_agents(alice_client, team, lean):
    response = alice_client.get(_tool_url(team, lean, "write", days=0))
    assert response.status_code == 200
    html = response.content.decode()
    first = independent_tool_tokens([WRITE_1, READ, HELP])["write"]
    second = independent_tool_tokens([WRITE_2, READ, HELP])["write"]
    assert second > first
    assert _stat(html, "tool-tokens") == f"{second:,}"
    # Release by release, newest first: changed in 1.1 by the difference, added in 1.0.
    history = re.findall(r'<tr data-snapshot="\d+" class="tool-(\w+)">(.*?)</tr>', html, re.S)
    assert [kind for kind, _ in history] == ["changed", "added"]
    assert f"{second:,}" in page_text(history[0][1]) and f"+{second - first:,}" in page_text(history[0][1])
    assert f"{first:,}" in page_text(history[1][1])
    # Five calls of write (four by claude-code, one by codex); judged: exact, truncated, newline only,
    # exact: 2 of 4 exact; one truncated arrival.
    assert _stat(html, "tool-calls") == "5"
    assert _stat(html, "tool-rate") == "50.0%"
    assert _stat(html, "tool-damaged") == "1"
    day = re.search(r'<tr data-day="2026-01-05">(.*?)</tr>', html, re.S)
    assert day is not None and page_text(day.group(1)).split()[:3] == ["2026-01-05", "5", "4"]
    verdicts = dict(re.findall(r'data-verdict="(\w+)">[^<]*<strong>(\d+)</strong>', html))
    assert verdicts == {"exact": "2", "newline_only": "1", "truncated": "1", "by_reference": "1"}
    # The calls, newest first, each linking to its drill-down; the read call is not among them.
    calls = [int(i) for i in re.findall(r'<tr data-call="(\d+)">', html)]
    stamps = dict(ToolCall.objects.filter(team=team, tool="write").values_list("pk", "request_ts"))
    assert len(calls) == 5 and set(calls) == set(stamps)
    assert calls == sorted(calls, key=lambda pk: (stamps[pk], pk), reverse=True)
    for call_id in calls:
        assert reverse("fidelity_call", args=[team.slug, int(call_id)]) in html
    # The agents that called it, linked to their pages.
    agents = re.findall(r'<tr data-agent="\d+">(.*?)</tr>', html, re.S)
    assert [page_text(a).split()[0] for a in agents] == ["claude-code", "codex"]
    assert [re.findall(r'<td class="num">([^<]*)</td>', a)[0] for a in agents] == ["4", "1"]  # calls
    assert reverse("fidelity_agent", args=[team.slug, "claude-code"]) in agents[0]
    assert reverse("fidelity_agent", args=[team.slug, "codex"]) in agents[1]


def test_calls_are_paginated_and_sortable(alice_client, team, lean, tmp_path):
    log = EnvelopeLog(session="s3", label="files-lean", client="claude-code").initialize()
    for i in range(25):
        log.call("write", {"target": f"n{i}.md", "path": "x" * (i + 1)})
    ingest(team, log, tmp_path, "many.jsonl")
    first = alice_client.get(_tool_url(team, lean, "write", days=0)).content.decode()
    ids = [int(i) for i in re.findall(r'<tr data-call="(\d+)">', first)]
    assert len(ids) == 25 and 'rel="next"' in first and 'rel="prev"' not in first
    second = alice_client.get(_tool_url(team, lean, "write", days=0, page=2)).content.decode()
    rest = [int(i) for i in re.findall(r'<tr data-call="(\d+)">', second)]
    # 30 calls in all: 25, then the 5 oldest; none twice.
    stamps = dict(ToolCall.objects.filter(team=team, tool="write").values_list("pk", "request_ts"))
    assert len(rest) == 5 and set(ids) | set(rest) == set(stamps) and 'rel="prev"' in second
    assert ids + rest == sorted(stamps, key=lambda pk: (stamps[pk], pk), reverse=True)
    # Sorted by size, smallest first, in the swapped region only.
    by_size = alice_client.get(
        _tool_url(team, lean, "write", days=0, sort="bytes"),
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="calls-region",
    )
    fragment = by_size.content.decode()
    assert fragment.lstrip().startswith('<section class="card flush" id="calls-region">')
    sizes = [int(s.replace(",", "")) for s in re.findall(r'<td class="num">([\d,]+)</td>\s*<td>', fragment)]
    assert len(sizes) == 25 and sizes == sorted(sizes)
    assert "HX-Request" in by_size["Vary"]


def test_empty_states_never_called_and_removed_in_a_later_release(alice_client, team, lean):
    never = alice_client.get(_tool_url(team, lean, "help", days=0)).content.decode()
    assert "No agent has called" in never and _stat(never, "tool-calls") == "0"
    assert _stat(never, "tool-tokens") == f"{independent_tool_tokens([WRITE_2, READ, HELP])['help']:,}"
    assert "No agent called it in this period" in never and "No call of this tool in this period" in never
    record(lean, [READ, HELP], "1.2")
    gone = alice_client.get(_tool_url(team, lean, "write", days=0)).content.decode()
    assert _stat(gone, "tool-tokens") == "–"
    assert "stopped listing it in 1.2" in page_text(gone)
    kinds = re.findall(r'<tr data-snapshot="\d+" class="tool-(\w+)">', gone)
    assert kinds == ["removed", "changed", "added"]
    # Its calls are still there.
    assert len(re.findall(r'<tr data-call="\d+">', gone)) == 5
    # In a period without calls the chart says so, and the call list is empty.
    recent = alice_client.get(_tool_url(team, lean, "write", days=7)).content.decode()
    assert "No call of this tool in this period" in recent
    # A name neither a snapshot nor a call knows is not a page.
    assert alice_client.get(_tool_url(team, lean, "delete_everything")).status_code == 404


def test_only_members_of_the_servers_team_see_it(client, team, lean, team_factory, user_factory):
    url = _tool_url(team, lean, "write")
    assert client.get(url).status_code == 302  # to the login page
    outsider = user_factory("mallory")
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    bob = user_factory("bob")
    other = team_factory("Elsewhere", bob)
    client.force_login(bob)
    assert client.get(url).status_code == 404
    # Their own team's URL space does not reach another team's server either.
    assert client.get(_tool_url(other, lean, "write")).status_code == 404
    viewer = user_factory("vic")
    Membership.objects.create(team=team, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    assert client.get(url).status_code == 200


def test_tool_alerts_link_to_the_tool_page_and_show_in_its_banner(alice_client, team, lean, tmp_path):
    Budget.objects.create(team=team, measure=Measure.DAMAGED_ARRIVALS, level=Level.ERROR, limit=0)
    log = EnvelopeLog(session="s4", label="files-lean", client="claude-code").initialize()
    log.call("write", {"target": "z.md", "content": DOC[:500], "expected_sha256": sha(DOC)})
    ingest(team, log, tmp_path, "cut.jsonl")
    damaged = Alert.objects.open().get(team=team, measure=Measure.DAMAGED_ARRIVALS)
    assert damaged.server == lean
    # The largest-tool rule names a tool of the server too.
    Budget.objects.create(
        team=team, server=lean, measure=Measure.MAX_TOOL_TOKENS, level=Level.WARNING, limit=1
    )
    evaluate_server(lean)
    largest = Alert.objects.open().get(team=team, measure=Measure.MAX_TOOL_TOKENS)
    tokens = independent_tool_tokens([WRITE_2, READ, HELP])
    biggest = max(tokens, key=tokens.__getitem__)
    page = alice_client.get(reverse("alert_list", args=[team.slug])).content.decode()
    assert f'href="{_tool_url(team, lean, "write")}">files-lean/write</a>' in page
    assert f'href="{_tool_url(team, lean, biggest)}">files-lean / {biggest}</a>' in page
    banner = alice_client.get(
        reverse("alert_banner", args=[team.slug]), {"server": str(lean.code), "tool": "write"}
    )
    text = page_text(banner.content.decode())
    expected = 2 if biggest == "write" else 1
    assert f"{expected} open alert{'s' if expected > 1 else ''} on files-lean / write" in text
    assert largest.tool_name == biggest and damaged.tool_name == "write"
    # The page asks for that banner.
    html = alice_client.get(_tool_url(team, lean, "write", days=0)).content.decode()
    assert f"?server={lean.code}&tool=write" in html


def test_pages_that_name_a_tool_link_to_it(alice_client, team, lean):
    url = _tool_url(team, lean, "write")
    server_page = alice_client.get(reverse("server_detail", args=[team.slug, lean.code])).content.decode()
    assert f'<a href="{url}">write</a>' in server_page
    snapshots = list(lean.snapshots.order_by("pk"))
    diff = alice_client.get(
        reverse("snapshot_diff", args=[team.slug, lean.code]), {"a": snapshots[0].pk, "b": snapshots[1].pk}
    ).content.decode()
    assert f'href="{url}"' in diff
    regressions = alice_client.get(
        reverse("regressions", args=[team.slug]), {"period": "all"}
    ).content.decode()
    assert f'<a href="{url}">write</a>' in regressions
    agent = alice_client.get(
        reverse("fidelity_agent", args=[team.slug, "claude-code"]), {"days": 0}
    ).content.decode()
    assert f'<a href="{url}">files-lean / write</a>' in agent
