"""The name rule (dashboard.teams.validators): names with control characters are refused where they
come in, and alerts about rows stored before the rule still reach their mailbox on one line."""

from __future__ import annotations

import json

import pytest
from django.core import mail
from django.urls import reverse

from dashboard.alerts.budgets import open_or_update_alert
from dashboard.alerts.models import Level, Measure
from dashboard.alerts.notify.delivery import deliver
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery
from dashboard.servers.config_import import SHELL, ConfigError, import_config_text
from dashboard.servers.models import McpServer, Stack, Transport
from dashboard.teams.models import ApiToken
from ingest.fidelity.forms import ReferenceUrlForm

INJECTED = "files\r\nBcc: attacker@example.com"


def test_the_server_form_refuses_a_name_with_cr_lf(alice_client, team):
    response = alice_client.post(
        reverse("server_add", args=[team.slug]),
        {
            "name": INJECTED,
            "transport": "http",
            "url": "http://127.0.0.1:9/mcp",
            "poll_interval_seconds": 900,
        },
    )
    assert response.status_code in (200, 400)
    assert "control characters" in response.content.decode()
    assert not McpServer.objects.exists()


def test_a_config_import_with_a_cr_lf_server_name_is_refused_whole(team):
    config = json.dumps(
        {"mcpServers": {INJECTED: {"url": "http://127.0.0.1:9/mcp"}, "ok": {"url": "http://x/"}}}
    )
    with pytest.raises(ConfigError, match="control characters"):
        import_config_text(team, config, filename="mcp.json", stack_name="agent", importer=SHELL)
    assert not McpServer.objects.exists() and not Stack.objects.exists()


def test_the_gate_api_refuses_a_cr_lf_server_name_as_invalid(client, team):
    _, token = ApiToken.issue(team, "ci")
    response = client.post(
        "/api/v1/check",
        data=json.dumps({"server": INJECTED, "tools_list": []}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 422
    assert "control characters" in json.dumps(response.json())


@pytest.mark.parametrize(
    ("url_name", "data"),
    [
        (
            "channels",
            {"name": "ops\nteam", "kind": "email", "target": "ops@example.com", "min_level": "warning"},
        ),
        ("create_api_token", {"name": "ci\r\njob"}),
        ("stacks", {"stack_name": "agent\x1b[31m", "config_text": '{"mcpServers": {}}'}),
    ],
)
def test_channel_token_and_stack_names_with_control_characters_are_refused(
    alice_client, team, url_name, data
):
    response = alice_client.post(reverse(url_name, args=[team.slug]), data, follow=True)
    assert "control characters" in response.content.decode()
    assert not Channel.objects.exists() and not ApiToken.objects.exists() and not Stack.objects.exists()


def test_a_reference_document_title_with_a_line_break_is_refused():
    form = ReferenceUrlForm({"url": "https://github.com/o/r/blob/main/a.md", "name": "a\nb"})
    assert not form.is_valid() and "control characters" in str(form.errors["name"])


def test_the_model_rule_holds_in_full_clean(team):
    server = McpServer(team=team, name=INJECTED, transport=Transport.HTTP, url="http://127.0.0.1:9/mcp")
    with pytest.raises(Exception, match="control characters"):
        server.full_clean()


def test_an_alert_for_a_server_stored_with_a_cr_lf_name_is_still_mailed_on_one_line(team, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    # A row from before the rule: created directly, as an old release or the admin could have.
    server = McpServer.objects.create(
        team=team, name=INJECTED, transport=Transport.HTTP, url="http://127.0.0.1:9/mcp"
    )
    Channel.objects.create(team=team, name="mail", kind=ChannelKind.EMAIL, config={"to": ["ops@example.com"]})
    change = open_or_update_alert(
        team,
        f"server:{server.pk}:fixed_tax_tokens",
        Measure.FIXED_TAX_TOKENS,
        Level.ERROR,
        4125.0,
        3500.0,
        "fixed tax is 4125",
        server.name,
        server=server,
    )
    delivery = Delivery.objects.get(event__alert=change.alert)
    assert deliver(delivery.pk).status == "sent"
    assert len(mail.outbox) == 1
    message = mail.outbox[0].message()
    assert message["Subject"].startswith("[mcp-tax] ERROR files Bcc: attacker@example.com")
    assert message["Bcc"] is None and mail.outbox[0].recipients() == ["ops@example.com"]
