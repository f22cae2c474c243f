"""The outbound policy on every request the dashboard makes on a user's behalf: HTTP MCP polls,
webhook, Slack and Apprise channels, and the checks at save time. Each refusal is proven against
a real HTTP server on 127.0.0.1 that must receive nothing (the suite allows loopback; these tests
take that away), and the pages show the failure's class and status, never the target's body."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from dashboard.alerts.forms import ChannelForm
from dashboard.alerts.notify.delivery import send_test
from dashboard.alerts.notify.models import AttemptStatus, Channel, ChannelKind
from dashboard.servers.config_import import SHELL, import_config_text
from dashboard.servers.forms import ServerForm
from dashboard.servers.models import McpServer, PollRun, Transport
from dashboard.tasks import poll as poll_server
from tests.helpers import Receiver

LOOPBACK_REFUSED = "127.0.0.1 is a loopback address; an operator can allow it with OUTBOUND_ALLOW_NETWORKS"
SECRET = b'{"jsonrpc": "2.0", "x": "SECRET-BODY"}'


@pytest.fixture
def strict(settings):
    settings.OUTBOUND_ALLOW_NETWORKS = []
    return settings


@pytest.mark.parametrize("transport", [Transport.HTTP, Transport.SSE])
def test_an_http_poll_of_an_inward_address_sends_nothing(team, settings, transport):
    with Receiver() as target:
        server = McpServer.objects.create(team=team, name="inward", transport=transport, url=target.url)
        settings.OUTBOUND_ALLOW_NETWORKS = []
        summary = poll_server(server.pk)
        assert target.requests == []
        assert summary.outcome == "connect_error"
        assert summary.message == f"refused by the outbound policy: {LOOPBACK_REFUSED}"
        server.refresh_from_db()
        assert server.last_error == summary.message
        # Allowed by the operator, the same URL is reached (so the silence above was the policy).
        settings.OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8"]
        poll_server(server.pk)
        assert target.requests != []


@pytest.mark.parametrize("kind", [ChannelKind.WEBHOOK, ChannelKind.SLACK])
def test_a_webhook_or_slack_channel_to_an_inward_address_sends_nothing(team, strict, kind):
    with Receiver() as target:
        channel = Channel.objects.create(team=team, name="inward", kind=kind, config={"url": target.url})
        attempt = send_test(channel)
        assert target.requests == []
    assert attempt.status == AttemptStatus.PERMANENT
    assert attempt.error == f"refused by the outbound policy: {LOOPBACK_REFUSED}"
    assert attempt.http_status is None


def test_an_apprise_channel_to_an_inward_host_sends_nothing(team, strict):
    with Receiver() as target:
        channel = Channel.objects.create(
            team=team,
            name="inward",
            kind=ChannelKind.APPRISE,
            config={"url": f"json://127.0.0.1:{target.port}/"},
        )
        attempt = send_test(channel)
        assert target.requests == []
    assert attempt.status == AttemptStatus.PERMANENT
    assert attempt.error == f"refused by the outbound policy: {LOOPBACK_REFUSED}"


def test_poll_errors_name_the_class_and_status_not_the_servers_reply(team, caplog):
    # Failing for good: a reply off the HTTP fast path is asked again through the SDK.
    with Receiver([500] * 8, reply=SECRET, content_type="application/json") as failing:
        server = McpServer.objects.create(team=team, name="fails", transport=Transport.HTTP, url=failing.url)
        assert poll_server(server.pk).message == f"{failing.url} answered with HTTP 500"
    with Receiver(ok_reply=SECRET, content_type="application/json") as talkative:
        server = McpServer.objects.create(
            team=team, name="talks", transport=Transport.HTTP, url=talkative.url
        )
        summary = poll_server(server.pk)
    assert summary.outcome == "protocol_error"
    assert "JSON-RPC error -32700 (parse error)" in summary.message
    runs = PollRun.objects.filter(server__team=team)
    assert runs.count() == 2 and not [r.message for r in runs if "SECRET" in r.message]
    assert "SECRET-BODY" in caplog.text  # the operator still has it, in the log


def test_channel_attempts_record_the_status_not_the_receivers_body(team, caplog):
    with Receiver([500], reply=SECRET) as target:
        channel = Channel.objects.create(
            team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": target.url}
        )
        attempt = send_test(channel)
    assert (attempt.status, attempt.http_status) == (AttemptStatus.TRANSIENT, 500)
    assert attempt.error == "HTTP 500 from the webhook"
    assert "SECRET-BODY" in caplog.text


# -- at save time ------------------------------------------------------------------------------


def _server_form(team, url: str) -> ServerForm:
    data = {"name": "gw", "transport": "http", "url": url, "poll_interval_seconds": 900, "enabled": True}
    return ServerForm({**data, "cwd": "", "command_line": ""}, team=team, allow_stdio=True)


def test_server_and_channel_forms_refuse_urls_that_resolve_inward(team, strict):
    form = _server_form(team, "http://localhost:8765/mcp")
    assert not form.is_valid()
    assert form.errors["url"] == [
        "localhost resolves to 127.0.0.1, a loopback address; "
        "an operator can allow it with OUTBOUND_ALLOW_NETWORKS"
    ]
    assert "169.254.169.254 is a link-local address" in str(
        _server_form(team, "http://169.254.169.254/").errors
    )
    for kind, url in [
        (ChannelKind.WEBHOOK, "http://100.64.0.7/hook"),
        (ChannelKind.SLACK, "https://[::ffff:10.0.0.5]/services/x"),
        (ChannelKind.APPRISE, "json://192.168.1.20:8080/notify"),
    ]:
        channel = ChannelForm({"name": "c", "kind": kind, "target": url, "min_level": "warning"})
        assert not channel.is_valid()
        assert "OUTBOUND_ALLOW_NETWORKS" in str(channel.errors), (kind, channel.errors)
    assert McpServer.objects.count() == 0


def test_an_allowed_network_passes_the_save_time_check(team, strict):
    strict.OUTBOUND_ALLOW_NETWORKS = ["127.0.0.0/8"]
    assert _server_form(team, "http://localhost:8765/mcp").is_valid()
    assert ChannelForm(
        {"name": "c", "kind": ChannelKind.WEBHOOK, "target": "http://127.0.0.1:9/h", "min_level": "warning"}
    ).is_valid()


def test_an_import_with_an_inward_http_server_imports_it_switched_off_and_the_rest_as_usual(team, strict):
    config = {
        "mcpServers": {
            "docs": {"url": "https://docs.example.invalid/mcp"},
            "local": {"url": "http://127.0.0.1:3000/mcp"},
        }
    }
    (result,) = import_config_text(
        team, json.dumps(config), filename=".mcp.json", stack_name="agent", importer=SHELL
    )
    local = next(e for e in result.entries if e.name == "local")
    assert (local.outcome, local.disabled) == ("created", True)
    assert local.reason == f"the outbound policy refuses its URL ({LOOPBACK_REFUSED})"
    assert McpServer.objects.get(name="docs").enabled
    assert not McpServer.objects.get(name="local").enabled
    assert set(team.stacks.get().servers.values_list("name", flat=True)) == {"docs", "local"}


def test_add_server_refuses_an_inward_url(team, strict):
    with pytest.raises(CommandError, match="localhost resolves to 127.0.0.1, a loopback address"):
        call_command("add_server", "--name", "x", "--url", "http://localhost:1/mcp", "--team", team.slug)
    assert McpServer.objects.count() == 0
