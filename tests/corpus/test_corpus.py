"""Every captured real server through the product: tokens, findings, snapshot, page, diff, gate.

Figures are checked against the fixed-tax formula written out in conftest.py (tiktoken directly).
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from dashboard.alerts.models import Budget, Level, Measure
from dashboard.servers.models import McpServer, Snapshot, Transport
from dashboard.servers.polling import record_snapshot
from dashboard.teams.models import ApiToken
from mcptax import findings, tokens
from mcptax.client import FetchResult
from tests.corpus.conftest import CAPTURES, cl100k_tokens, modified_copy, oracle_tax, visible
from tests.helpers import compact


def test_the_corpus_has_at_least_twenty_servers():
    assert len(CAPTURES) >= 20


def test_fixed_tax_matches_the_formula_and_findings_run(capture):
    tools = capture["tools"]
    report = tokens.account(tools, encoding="cl100k_base")
    assert report.fixed_tax_tokens == oracle_tax(tools)
    assert [t.tokens for t in report.tools] == [cl100k_tokens(visible(t)) for t in tools]
    found = findings.analyze(tools)
    names = {t["name"] for t in tools}
    assert all(set(finding.tools) <= names for finding in found)
    assert {finding.kind for finding in found} <= FINDING_KINDS


# The six kinds of finding, written here (not read from the product's own tuple).
FINDING_KINDS = {
    "near_duplicate_tools",
    "oversized_description",
    "oversized_schema",
    "repeated_subschema",
    "bulk_without_reference",
    "large_surface",
}


def test_the_corpus_yields_every_kind_of_finding():
    """The per-capture check above passes on a capture with no findings: across the corpus, each
    kind must actually occur, so a rule that stopped firing altogether fails here."""
    from tests.corpus.conftest import load_capture

    seen = {f.kind for path in CAPTURES for f in findings.analyze(load_capture(path)["tools"])}
    assert seen == FINDING_KINDS


def _fetch_result(capture: dict, tools: list[dict], version: str) -> FetchResult:
    info = capture["initialize"].get("serverInfo", {})
    return FetchResult(
        tools=tools,
        server_name=info.get("name"),
        server_version=version,
        server_title=info.get("title"),
        protocol_version=capture["initialize"].get("protocolVersion"),
        instructions=capture["initialize"].get("instructions"),
        prompts_count=None,
        resources_count=None,
        pages=1,
        payload_bytes=0,
    )


@pytest.mark.django_db
def test_snapshot_page_gate_and_diff(capture, team, alice_client, client):
    tools = capture["tools"]
    version = capture["initialize"]["serverInfo"]["version"]
    server = McpServer.objects.create(
        team=team, name="corpus", transport=Transport.HTTP, url="http://127.0.0.1:9/"
    )
    first, changed = record_snapshot(server, _fetch_result(capture, tools, version))
    assert changed and first.analysis_errors == []
    # What the stdio replay checked for every capture (now four, tests/corpus/test_replay.py): the
    # stored text is the capture's tools, key order included, with its version and instructions.
    assert compact(first.tools_raw) == compact(tools)
    assert first.server_version == version
    assert first.instructions == (capture["initialize"].get("instructions") or "")
    assert first.fixed_tax_tokens == oracle_tax(tools)
    assert dict(first.tools.values_list("name", "tokens")) == {
        t["name"]: cl100k_tokens(visible(t)) for t in tools
    }
    assert first.findings == [f.to_dict() for f in findings.analyze(tools)]

    page = alice_client.get(reverse("server_detail", args=[team.slug, server.code]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="analysis-errors"' not in html
    for tool in tools:
        assert f">{tool['name']}<" in html, tool["name"]

    # The gate on the modified copy, against a budget set at the capture's own tax.
    candidate, removed, grown = modified_copy(tools)
    Budget.objects.create(
        team=team, measure=Measure.FIXED_TAX_TOKENS, level=Level.ERROR, limit=oracle_tax(tools)
    )
    _, token = ApiToken.issue(team, "ci")
    response = client.post(
        "/api/v1/check",
        data=json.dumps({"server": "corpus", "tools_list": {"tools": candidate}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["status"] == "ok" and result["errors"] == []
    assert result["totals"]["fixed_tax_tokens"] == oracle_tax(candidate)
    assert result["totals"]["delta_tokens"] == oracle_tax(candidate) - oracle_tax(tools)
    assert result["verdict"] == ("fail" if oracle_tax(candidate) > oracle_tax(tools) else "pass")
    statuses = {t["name"]: t["status"] for t in result["tools"] if t["status"] != "unchanged"}
    assert statuses == ({removed: "removed"} if removed else {}) | {grown: "grown"}

    second, changed = record_snapshot(server, _fetch_result(capture, candidate, version + "+grown"))
    assert changed and second.analysis_errors == []
    response = alice_client.get(
        reverse("snapshot_diff", args=[team.slug, server.code]), {"a": first.pk, "b": second.pk}
    )
    assert response.status_code == 200
    diff = response.context["diff"]
    assert [c.name for c in diff.removed] == ([removed] if removed else [])
    assert [c.name for c in diff.changed] == [grown]
    before = {t["name"]: t for t in tools}[grown]
    after = candidate[-1]
    assert diff.changed[0].delta == cl100k_tokens(visible(after)) - cl100k_tokens(visible(before)) > 0
    assert diff.delta == oracle_tax(candidate) - oracle_tax(tools)
    assert Snapshot.objects.filter(server=server).count() == 2
