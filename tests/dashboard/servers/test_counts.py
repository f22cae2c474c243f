"""Counts per tracked encoding and profile on real polls, and provider-exact counts against a local
HTTP server that speaks Anthropic's documented token-counting endpoint (the provider itself cannot
be reached here)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dashboard.servers.models import McpServer, ProviderCount, Snapshot, Transport
from dashboard.tasks import poll as poll_server
from examples.servers.launch import stdio_command
from tests.helpers import compact, tiktoken_reference

pytestmark = pytest.mark.django_db
API_KEY = "sk-ant-test-0123456789"


def ref_count(value: Any, encoding: str) -> int:
    return len(tiktoken_reference(encoding).encode_ordinary(compact(value)))


def qualified(server: str, tool: dict) -> dict:
    rendered = {"name": f"mcp__{server}__{tool['name']}"}
    if "description" in tool:
        rendered["description"] = tool["description"]
    rendered["input_schema"] = tool.get("inputSchema", {"type": "object"})
    return rendered


class CountTokensEndpoint:
    """POST /v1/messages/count_tokens as Anthropic documents it: x-api-key and anthropic-version
    headers, a JSON body with model, messages and tools; {"input_tokens": N}, or an error object
    {"type": "error", "error": {"type", "message"}} with 400/401. Its N is a stand-in figure the
    test can compute: 7 per tool plus the UTF-8 length of the tools JSON divided by 4."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status, answer = endpoint.answer(self.path, self.headers, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @staticmethod
    def figure(tools: list[dict]) -> int:
        return 7 * len(tools) + len(json.dumps(tools).encode()) // 4

    def answer(self, path: str, headers: Any, body: bytes) -> tuple[int, dict]:
        def error(status: int, kind: str, message: str) -> tuple[int, dict]:
            return status, {"type": "error", "error": {"type": kind, "message": message}}

        if path != "/v1/messages/count_tokens":
            return error(404, "not_found_error", "Not found")
        if headers.get("x-api-key") != API_KEY:
            return error(401, "authentication_error", "invalid x-api-key")
        if headers.get("anthropic-version") != "2023-06-01":
            return error(400, "invalid_request_error", "anthropic-version header is required")
        request = json.loads(body)
        if not request.get("model") or not request.get("messages"):
            return error(400, "invalid_request_error", "model and messages are required")
        return 200, {"input_tokens": self.figure(request.get("tools", []))}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint(settings):
    served = CountTokensEndpoint()
    settings.ANTHROPIC_API_BASE_URL = served.url
    yield served
    served.close()


def _server(team, name: str = "lean") -> McpServer:
    command, argv, env = stdio_command("lean")
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.STDIO, command=command, args=argv, env=env
    )


def test_a_poll_counts_every_profile_in_every_tracked_encoding(team):
    team.token_encodings = ["cl100k_base", "o200k_base"]
    team.save()
    summary = poll_server(_server(team).pk)
    assert summary.outcome == "ok", summary.message
    snap = Snapshot.objects.get(pk=summary.snapshot_id)
    tools = snap.tools_raw
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in tools]
    for encoding in ("cl100k_base", "o200k_base"):
        assert snap.counts["mcp"][encoding]["fixed_tax_tokens"] == ref_count(visible, encoding)
        assert snap.counts["claude"][encoding]["fixed_tax_tokens"] == ref_count(
            [qualified("lean", t) for t in tools], encoding
        )
        assert snap.counts["wire"][encoding]["fixed_tax_tokens"] == ref_count({"tools": tools}, encoding)
        for tool, stored in zip(visible, snap.tools.all(), strict=True):
            assert stored.counts[encoding]["tokens"] == ref_count(tool, encoding)
    # The main encoding's figures are the columns the rest of the product has always read.
    assert snap.encoding == "cl100k_base" and snap.fixed_tax_tokens == ref_count(visible, "cl100k_base")
    assert snap.figure("o200k_base") == ref_count(visible, "o200k_base") != snap.fixed_tax_tokens
    assert snap.encodings == ["cl100k_base", "o200k_base"]


def test_a_team_tracking_only_o200k_counts_in_o200k(team):
    team.token_encodings = ["o200k_base"]
    team.save()
    snap = Snapshot.objects.get(pk=poll_server(_server(team).pk).snapshot_id)
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in snap.tools_raw]
    assert snap.encoding == "o200k_base" and snap.fixed_tax_tokens == ref_count(visible, "o200k_base")
    assert list(snap.counts["mcp"]) == ["o200k_base"]
    assert snap.figure("cl100k_base") is None


def test_provider_count_once_per_new_snapshot_never_per_unchanged_poll(
    team, endpoint, django_capture_on_commit_callbacks
):
    team.provider_keys = {"anthropic": API_KEY}
    team.save()
    server = _server(team)
    with django_capture_on_commit_callbacks(execute=True):
        first = poll_server(server.pk)
    with django_capture_on_commit_callbacks(execute=True):
        second = poll_server(server.pk)
    assert first.changed and not second.changed
    assert len(endpoint.requests) == 1
    sent = json.loads(endpoint.requests[0]["body"])
    snap = Snapshot.objects.get(pk=first.snapshot_id)
    expected_tools = [qualified("lean", t) for t in snap.tools_raw]
    assert sent["tools"] == expected_tools and sent["model"] == "claude-sonnet-4-5"
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    row = ProviderCount.objects.get(snapshot=snap)
    assert row.error == "" and row.input_tokens == CountTokensEndpoint.figure(expected_tools)
    assert (
        row.ours
        == ref_count(expected_tools, "cl100k_base")
        == snap.counts["claude"]["cl100k_base"]["fixed_tax_tokens"]
    )
    assert row.difference == row.input_tokens - row.ours
    # The key is stored encrypted: the database column never holds it.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT provider_keys FROM dashboard_team WHERE id = %s", [team.pk])
        assert API_KEY not in cursor.fetchone()[0]


def test_a_failing_provider_is_recorded_and_never_breaks_the_poll(
    team, endpoint, settings, django_capture_on_commit_callbacks
):
    team.provider_keys = {"anthropic": "sk-ant-wrong"}
    team.save()
    with django_capture_on_commit_callbacks(execute=True):
        summary = poll_server(_server(team).pk)
    assert summary.outcome == "ok" and summary.changed
    row = ProviderCount.objects.get(snapshot_id=summary.snapshot_id)
    assert row.input_tokens is None and row.error == "HTTP 401: invalid x-api-key"
    assert Snapshot.objects.get(pk=summary.snapshot_id).analysis_errors == []

    # The outbound policy applies: with loopback no longer allowed the request is refused, recorded.
    settings.OUTBOUND_ALLOW_NETWORKS = []
    team.provider_keys = {"anthropic": API_KEY}
    team.save()
    with django_capture_on_commit_callbacks(execute=True):
        other = poll_server(_server(team, "lean-2").pk)
    assert other.outcome == "ok"
    refused = ProviderCount.objects.get(snapshot_id=other.snapshot_id)
    assert refused.input_tokens is None and refused.error.startswith("refused by the outbound policy")
    assert len(endpoint.requests) == 1


def test_no_key_no_request(team, endpoint, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        summary = poll_server(_server(team).pk)
    assert summary.changed and endpoint.requests == []
    assert not ProviderCount.objects.exists()


def test_set_provider_key_command_stores_encrypted_and_validates(team, monkeypatch):
    import io

    from django.core.management import CommandError, call_command

    from dashboard.teams.models import Team

    monkeypatch.setattr("sys.stdin", io.StringIO(API_KEY + "\n"))
    out = io.StringIO()
    call_command("set_provider_key", "--team", team.slug, "--encodings", "o200k_base,cl100k_base", stdout=out)
    fresh = Team.objects.get(pk=team.pk)
    assert fresh.provider_keys == {"anthropic": API_KEY}
    assert fresh.tracked_encodings() == ["o200k_base", "cl100k_base"] and fresh.main_encoding == "o200k_base"
    assert API_KEY not in out.getvalue()
    with pytest.raises(CommandError, match="Encodings must be among cl100k_base, o200k_base"):
        call_command("set_provider_key", "--team", team.slug, "--encodings", "p50k_base", "--keep-key")
    call_command("set_provider_key", "--team", team.slug, "--remove", stdout=io.StringIO())
    assert Team.objects.get(pk=team.pk).provider_keys == {}


def test_the_settings_form_starts_tracking_o200k_and_recounts_the_current_snapshot(team, alice_client):
    from django.urls import reverse

    snap = Snapshot.objects.get(pk=poll_server(_server(team).pk).snapshot_id)
    assert set(snap.counts["mcp"]) == {"cl100k_base"}
    url = reverse("team_counting", args=[team.slug])
    form = {
        "main_encoding": "cl100k_base",
        "context_window": "128000",
        "anthropic_model": "claude-sonnet-4-5",
    }

    # The main encoding must be a real one; nothing changes on a refusal.
    refused = alice_client.post(url, {**form, "main_encoding": "p50k_base"})
    assert refused.status_code == 400 and b"Select a valid choice" in refused.content
    team.refresh_from_db()
    assert team.token_encodings == [] and team.context_window == 200_000

    page = alice_client.post(
        url, {**form, "encodings": ["o200k_base"], "anthropic_key": API_KEY}, follow=True
    )
    assert b"1 current snapshot recounted" in page.content
    team.refresh_from_db()
    assert team.tracked_encodings() == ["cl100k_base", "o200k_base"] and team.context_window == 128_000
    assert team.provider_keys == {"anthropic": API_KEY}
    assert API_KEY.encode() not in page.content  # never shown back
    snap.refresh_from_db()
    visible = [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in snap.tools_raw]
    # Recounted from the stored document, in the new encoding; the main figures stay as polled.
    assert snap.counts["mcp"]["o200k_base"]["fixed_tax_tokens"] == ref_count(visible, "o200k_base")
    assert snap.counts["claude"]["o200k_base"]["fixed_tax_tokens"] == ref_count(
        [qualified("lean", t) for t in snap.tools_raw], "o200k_base"
    )
    assert snap.encoding == "cl100k_base" and snap.fixed_tax_tokens == ref_count(visible, "cl100k_base")
    for tool, stored in zip(visible, snap.tools.all(), strict=True):
        assert stored.counts["o200k_base"]["tokens"] == ref_count(tool, "o200k_base")

    # An empty key field keeps the stored key; the checkbox removes it.
    alice_client.post(url, {**form, "encodings": ["o200k_base"]})
    team.refresh_from_db()
    assert team.provider_keys == {"anthropic": API_KEY}
    alice_client.post(url, {**form, "remove_key": "on"})
    team.refresh_from_db()
    assert team.provider_keys == {} and team.tracked_encodings() == ["cl100k_base"]


def test_the_overview_switches_its_tax_columns_to_another_tracked_encoding(team, alice_client):
    import re

    from django.urls import reverse

    from tests.dashboard.alerts.factories import record, stdio_server, tools_list

    team.token_encodings = ["cl100k_base", "o200k_base"]
    team.save()
    server = stdio_server(team)
    record(server, "sprawling", False)
    record(server, "sprawling", True)

    def visible(tools: list[dict]) -> list[dict]:
        return [{k: t[k] for k in ("name", "description", "inputSchema") if k in t} for t in tools]

    before = visible(tools_list("sprawling", False)["tools"])
    after = visible(tools_list("sprawling", True)["tools"])
    url = reverse("team_overview", args=[team.slug])
    for encoding, query in (("cl100k_base", ""), ("o200k_base", "?encoding=o200k_base")):
        page = alice_client.get(url + query).content.decode()
        row = page[page.index(f'id="server-row-{server.pk}"') :].split("</tr>")[0]
        tax = ref_count(after, encoding)
        delta = tax - ref_count(before, encoding)
        assert re.search(rf'class="num tax" title="{encoding}">{tax:,}<', row), row
        assert f">+{delta:,}</a>" in row
        # the team's eager total, in the same encoding (its client defers: beside the upfront)
        assert f"Sending every schema would cost <strong>{tax:,}</strong> tokens" in page
    assert ref_count(after, "o200k_base") != ref_count(after, "cl100k_base")
    # An encoding the team does not track falls back to the main one.
    page = alice_client.get(url + "?encoding=p50k_base").content.decode()
    assert f'title="cl100k_base">{ref_count(after, "cl100k_base"):,}<' in page
