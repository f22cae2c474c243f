"""The tools a request sent beside the profile's prediction from the server's current snapshot;
a difference over 2% is a finding on the methodology page."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from ingest.capture.models import IngestJob
from ingest.otel.models import SentTools
from mcptax import tokens
from tests.dashboard.factories import http_server, record
from tests.ingest.otel.support import run_to_end
from tests.ingest.otel.test_receiver_answers import CLAUDE, json_body, post

BODY = json.loads(CLAUDE["events"][1]["attributes"]["body"])
SENT = {t["name"]: t for t in BODY["tools"]}


def compact(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def mcp_tool(sent: dict, description: str) -> dict:
    """The server's own tools/list entry behind a sent definition, with another description."""
    return {
        "name": sent["name"].split("__")[-1],
        "description": description,
        "inputSchema": sent["input_schema"],
    }


@pytest.fixture
def docs_server(team):
    server = http_server(team, "docs")
    write, read = SENT["mcp__docs__write_doc"], SENT["mcp__docs__read_doc"]
    # The snapshot's write_doc says more than what the client sent (an older or newer release).
    longer = write["description"] + " It also keeps a history of every version written, with authors."
    record(server, [mcp_tool(write, longer), mcp_tool(read, read["description"])], "1.0.0")
    server.refresh_from_db()
    return server, longer


def test_sent_tools_are_compared_with_the_snapshot_and_the_difference_is_a_finding(
    client, alice_client, team, team_token, docs_server
):
    server, longer = docs_server
    assert post(client, team_token[1], json_body([CLAUDE["events"][1]])).status_code == 200
    run_to_end(IngestJob.objects.get(team=team).pk)
    (sent,) = SentTools.objects.filter(team=team)
    comparison = sent.predicted["docs"]
    write, read = SENT["mcp__docs__write_doc"], SENT["mcp__docs__read_doc"]
    predicted_write = {
        "name": "mcp__docs__write_doc",
        "description": longer,
        "input_schema": write["input_schema"],
    }
    for enc in ("cl100k_base", "o200k_base"):
        measured = tokens.count(compact(write), enc) + tokens.count(compact(read), enc)
        predicted = tokens.count(compact(predicted_write), enc) + tokens.count(compact(read), enc)
        assert (comparison["measured"][enc], comparison["predicted"][enc]) == (measured, predicted)
        assert comparison["differences"][enc] == pytest.approx((measured - predicted) / predicted)
    assert comparison["finding"] is True and comparison["tools"] == ["write_doc", "read_doc"]
    assert comparison["snapshot"] == server.current_snapshot_id and "tickets" not in sent.predicted

    page = alice_client.get(reverse("methodology")).content.decode()
    assert 'id="measured-findings"' in page and 'data-server="docs"' in page
    diff = round(100 * comparison["differences"]["cl100k_base"], 1)
    assert f"{diff}%" in page


def test_no_finding_when_the_snapshot_matches_what_was_sent(client, alice_client, team, team_token):
    server = http_server(team, "docs")
    write, read = SENT["mcp__docs__write_doc"], SENT["mcp__docs__read_doc"]
    record(server, [mcp_tool(write, write["description"]), mcp_tool(read, read["description"])], "1.0.0")
    assert post(client, team_token[1], json_body([CLAUDE["events"][1]])).status_code == 200
    run_to_end(IngestJob.objects.get(team=team).pk)
    comparison = SentTools.objects.get(team=team).predicted["docs"]
    assert (
        comparison["differences"] == {"cl100k_base": 0.0, "o200k_base": 0.0}
        and comparison["finding"] is False
    )
    page = alice_client.get(reverse("methodology")).content.decode()
    assert 'id="measured-empty"' in page and 'id="measured-findings"' not in page
