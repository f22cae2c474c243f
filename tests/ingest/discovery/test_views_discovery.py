"""The discovery pages on an ingested Claude Code transcript with ToolSearch events: the tool
panel's shares of sessions, wasted loads, searches and misses; the agent panel's tokens per session
(paid against the predictions); the team view per server; empty states; access."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard.teams.models import Membership
from ingest.capture.pipeline import ingest_path
from mcptax import loading
from tests.dashboard.factories import http_server, independent_tokens, page_text, record, tool

pytestmark = pytest.mark.django_db

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"
ECHO = tool("echo", "Echo the text back.", {"text": {"type": "string"}})
ADD = tool("add", "Add two numbers.", {"a": {"type": "number"}, "b": {"type": "number"}})
MUL = tool("multiply", "Multiply two numbers.", {"a": {"type": "number"}, "b": {"type": "number"}})
SAVE = tool("save", "Save a note.", {"note": {"type": "string"}})
SERVERS = {"echo": [ECHO], "calc": [ADD, MUL], "notes": [SAVE]}


def definition_tokens(server: str, raw: dict) -> int:
    """A tool as Claude Code sends it (mcp__<server>__<tool>, description, input_schema), counted directly."""
    rendered = {
        "name": f"mcp__{server}__{raw['name']}",
        "description": raw["description"],
        "input_schema": raw["inputSchema"],
    }
    return independent_tokens(rendered)


def eager_tokens(server: str) -> int:
    tools = [
        {
            "name": f"mcp__{server}__{t['name']}",
            "description": t["description"],
            "input_schema": t["inputSchema"],
        }
        for t in SERVERS[server]
    ]
    return independent_tokens(tools)


@pytest.fixture
def ingested(team, tmp_path):
    servers = {}
    for name, tools in SERVERS.items():
        servers[name] = http_server(team, name)
        record(servers[name], tools, "1.0")
    # The fixture's session, moved to yesterday: the pages look at recent sessions.
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    log = tmp_path / "session.jsonl"
    log.write_text((LOGS / "claude_code_tool_search.jsonl").read_text().replace("2026-05-04", yesterday))
    job = ingest_path(team, log)
    assert job.status == "done", job.error
    return servers


def fragment(client, name, *args):
    response = client.get(reverse(name, args=args), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


def stat(html: str, stat_id: str) -> str:
    found = re.search(rf'id="{stat_id}">(.*?)</div>', html, re.S)
    assert found, f"no {stat_id}"
    return page_text(found.group(1)).strip()


def test_tool_panel_shares_wasted_loads_searches_and_misses(alice_client, team, ingested):
    html = fragment(alice_client, "discovery_tool", team.slug, ingested["calc"].code, "multiply")
    # one deferring session: multiply loaded twice (a keyword search, then select: after the
    # compaction dropped it), never called
    assert stat(html, "tool-loaded-pct") == "100.0%"
    assert stat(html, "tool-called-pct") == "0.0%"
    assert stat(html, "tool-wasted") == "2"
    searches = page_text(re.search(r'id="tool-searches">(.*?)</table>', html, re.S).group(1))
    assert "select:mcp__calc__multiply" in searches and "calculator add numbers" in searches

    html = fragment(alice_client, "discovery_tool", team.slug, ingested["calc"].code, "add")
    assert (stat(html, "tool-called-pct"), stat(html, "tool-wasted")) == ("100.0%", "0")
    # the keyword search that found nothing came before add was called
    misses = page_text(re.search(r'id="tool-misses">(.*?)</table>', html, re.S).group(1))
    assert "slack post message" in misses

    html = fragment(alice_client, "discovery_tool", team.slug, ingested["echo"].code, "echo")
    misses = page_text(re.search(r'id="tool-misses">(.*?)</table>', html, re.S).group(1))
    assert "slack post message" not in misses  # echo was called before that miss


def test_agent_panel_paid_against_the_predictions(alice_client, team, ingested):
    html = fragment(alice_client, "discovery_agent", team.slug, "claude-code")
    row = re.search(r'<tr data-session="5b1d7c2e[^"]*">(.*?)</tr>', html, re.S).group(1)
    requests = 9
    eager = requests * sum(eager_tokens(s) for s in SERVERS)
    assert f'data-eager="{eager}"' in row
    # loads carried: echo in 8 requests, add in 5, multiply in 1 then (reloaded) 2
    loads = (
        8 * definition_tokens("echo", ECHO)
        + 5 * definition_tokens("calc", ADD)
        + 3 * definition_tokens("calc", MUL)
    )
    stack = loading.stack_figures(
        [loading.ServerTools(n, SERVERS[n]) for n in sorted(SERVERS)], "claude-code", setting="true"
    )
    deferred = requests * stack.modes[loading.Mode.DEFERRED].upfront
    assert f'data-deferred="{deferred}"' in row
    assert f'data-paid="{deferred + loads}"' in row
    # Four small tools: the search tool and the name list cost more than sending them all.
    assert deferred + loads > eager


def test_team_view_per_server_and_advice(alice_client, team, ingested):
    html = alice_client.get(reverse("discovery_team", args=[team.slug])).content.decode()
    paid = {
        server: int(figure.replace(",", ""))
        for server, figure in re.findall(
            r'<tr data-server="([^"]+)">.*?<td class="num strong">([\d,]+)</td>', html, re.S
        )
    }
    # Each server: the session's 9 requests x its part of the stack's deferred upfront, plus what
    # its tools' loads carried (echo 8 requests; add 5; multiply 1, then 2 after its reload; save
    # was called without a load).
    stack = loading.stack_figures(
        [loading.ServerTools(n, SERVERS[n]) for n in sorted(SERVERS)], "claude-code", setting="true"
    )
    share = {s.server: s.modes[loading.Mode.DEFERRED].upfront for s in stack.servers}
    assert paid == {
        "echo": 9 * share["echo"] + 8 * definition_tokens("echo", ECHO),
        "calc": 9 * share["calc"] + 5 * definition_tokens("calc", ADD) + 3 * definition_tokens("calc", MUL),
        "notes": 9 * share["notes"],
    }
    assert stat(html, "team-paid") == f"{sum(paid.values()):,}"
    assert stat(html, "team-deferring") == "1"
    assert stat(html, "team-wasted") == "2"


def test_server_and_tool_panels_show_the_history_advice_with_its_saving(
    alice_client, team, ingested, settings
):
    settings.DISCOVERY_MIN_SESSIONS = 1  # the fixture is one session
    html = fragment(alice_client, "discovery_server", team.slug, ingested["calc"].code)
    rename = unescape(page_text(re.search(r'<li data-kind="rename_missed".*?</li>', html, re.S).group(0)))
    # "slack post message" found nothing, then add (calc) was called: one request that carried
    # calc's deferred upfront alone (its name list and ToolSearch; no instructions).
    listing = "<available-deferred-tools>\nmcp__calc__add\nmcp__calc__multiply\n</available-deferred-tools>"
    upfront = independent_tokens_text(listing) + independent_tokens(loading.CLAUDE_CODE_TOOL_SEARCH)
    assert '"slack post message"' in rename and f"saves {upfront:,} tokens per period" in rename

    html = fragment(alice_client, "discovery_tool", team.slug, ingested["calc"].code, "add")
    keep = page_text(re.search(r'<li data-kind="keep_eager" data-tool="add".*?</li>', html, re.S).group(0))
    # add was called in the one session: deferred it cost its name-list line in all 9 requests and
    # its definition in the 5 after its load; eager, its definition in all 9.
    saving = independent_tokens_text("mcp__calc__add\n") * 9 + definition_tokens("calc", ADD) * (5 - 9)
    expected = f"saves {saving:,}" if saving >= 0 else f"costs {-saving}"
    assert "called in 1 of 1 deferring sessions" in keep and f"{expected} tokens per session" in keep


def independent_tokens_text(text: str) -> int:
    from tests.helpers import tiktoken_reference

    return len(tiktoken_reference("cl100k_base").encode_ordinary(text))


def test_empty_states_name_the_logs_that_carry_discovery(alice_client, team):
    server = http_server(team, "echo")
    record(server, [ECHO], "1.0")
    html = alice_client.get(reverse("discovery_team", args=[team.slug])).content.decode()
    assert "No log carries tool-discovery events yet" in html and "ToolSearch" in html
    html = fragment(alice_client, "discovery_tool", team.slug, server.code, "echo")
    assert "tool_search" in html and "defer_loading" in html


def test_another_team_sees_nothing(client, team, ingested, user_factory, team_factory):
    bob = user_factory("bob")
    team_factory("Other", bob)
    client.force_login(bob)
    assert client.get(reverse("discovery_team", args=[team.slug])).status_code == 404
    assert (
        client.get(reverse("discovery_tool", args=[team.slug, ingested["calc"].code, "add"])).status_code
        == 404
    )
    assert not Membership.objects.filter(user=bob, team=team).exists()
