"""Telemetry on the pages: the Ingest page's source card, the set-up page with a token shown once,
and the agent page's measured tokens per session with the tool definitions' share."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from dashboard.teams.models import ApiToken
from ingest.capture.models import IngestJob
from mcptax import tokens
from tests.ingest.otel.support import run_to_end
from tests.ingest.otel.test_receiver_answers import CLAUDE, json_body, post


def test_the_ingest_page_shows_telemetry_as_a_source(alice_client, team):
    page = alice_client.get(reverse("ingest_home", args=[team.slug])).content.decode()
    assert 'id="telemetry-source"' in page
    assert "http://testserver/api/v1/otel</code>" in page
    assert reverse("ingest_telemetry", args=[team.slug]) in page
    assert "No agent has reported yet" in page


def test_the_token_is_shown_once_in_the_exact_lines_and_works(alice_client, client, team):
    url = reverse("ingest_telemetry", args=[team.slug])
    before = alice_client.get(url).content.decode()
    assert "&lt;team API token&gt;" in before and 'id="token-once"' not in before
    response = alice_client.post(reverse("ingest_telemetry_token", args=[team.slug]))
    page = response.content.decode()
    token_row = ApiToken.objects.get(team=team, name="telemetry")
    plaintext = re.search(r"Authorization=Bearer (mcpt_[A-Za-z0-9_-]+)&quot;", page).group(1)
    assert ApiToken.authenticate(plaintext) == token_row
    assert 'id="token-once"' in page
    assert "export OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://testserver/api/v1/otel/v1/logs" in page
    assert f"headers = {{ &quot;Authorization&quot; = &quot;Bearer {plaintext}&quot; }}" in page
    # Shown once: the page never shows it again.
    assert plaintext not in alice_client.get(url).content.decode()
    # The lines work: the endpoint takes a body with that token.
    assert post(client, plaintext, json_body(CLAUDE["events"][:1])).status_code == 200


def test_a_viewer_cannot_create_a_token(client, team, user_factory):
    from dashboard.teams.models import Membership

    viewer = user_factory("vera")
    Membership.objects.create(team=team, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    assert client.post(reverse("ingest_telemetry_token", args=[team.slug])).status_code in (403, 404)
    assert not ApiToken.objects.filter(team=team).exists()
    assert (
        "Create a telemetry token"
        not in client.get(reverse("ingest_telemetry", args=[team.slug])).content.decode()
    )


def test_agent_page_shows_measured_tokens_and_the_tool_definition_share(
    alice_client, client, team, team_token
):
    assert post(client, team_token[1], json_body(CLAUDE["events"])).status_code == 200
    run_to_end(IngestJob.objects.get(team=team).pk)
    page = alice_client.get(reverse("fidelity_agent", args=[team.slug, "claude-code"])).content.decode()
    assert 'id="measured-sessions"' in page
    session = CLAUDE["events"][0]["attributes"]["session.id"]
    row = page[page.index(f'data-session="{session}"') :]
    row = row[: row.index("</tr>")]
    body = json.loads(CLAUDE["events"][1]["attributes"]["body"])
    tools = tokens.count(json.dumps(body["tools"], separators=(",", ":"), ensure_ascii=False), "cl100k_base")
    share = round(100 * tools / (1200 + 15400 + 820), 1)
    for figure in ("1,200", "15,400", "820", "310", f"{tools:,}", f"{share}%"):
        assert f">{figure}</td>" in row, figure

    telemetry = alice_client.get(reverse("ingest_telemetry", args=[team.slug])).content.decode()
    assert 'data-agent="claude-code"' in telemetry and "claude_code.tool_result" in telemetry


@pytest.mark.django_db
def test_telemetry_quarantine_is_listed_on_the_set_up_page(alice_client, client, team, team_token):
    event = {
        "body": "claude_code.brand_new",
        "attributes": {**CLAUDE["events"][0]["attributes"], "event.name": "brand_new"},
    }
    post(client, team_token[1], json_body([event]))
    run_to_end(IngestJob.objects.get(team=team).pk)
    page = alice_client.get(reverse("ingest_telemetry", args=[team.slug])).content.decode()
    assert "unknown_event:claude_code.brand_new" in page
    assert "1 in quarantine" in alice_client.get(reverse("ingest_home", args=[team.slug])).content.decode()
