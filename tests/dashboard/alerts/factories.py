"""Builders the alert tests share: a real local webhook receiver, alerts opened through the product's
own path, and snapshots from real fetches of the example servers."""

from __future__ import annotations

import functools
import json

from dashboard.alerts.budgets import evaluate_snapshot, open_or_update_alert
from dashboard.alerts.models import Alert, Level, Measure
from dashboard.alerts.notify.models import (
    Delivery,
)
from dashboard.servers.models import McpServer, Snapshot, Transport
from dashboard.servers.polling import record_snapshot
from dashboard.tasks import poll as poll_server
from examples.servers.launch import stdio_command
from mcptax.client import FetchResult, ServerTarget, fetch_tools_sync
from tests.conftest import ROOT
from tests.helpers import CONNECT_BUDGET, Receiver

__all__ = ["Receiver"]


def open_alert(team, rule_key="server:x:fixed_tax_tokens", level=Level.ERROR, value=4125.0):
    return open_or_update_alert(
        team,
        rule_key,
        Measure.FIXED_TAX_TOKENS,
        level,
        value,
        3500.0,
        f"fixed tax is {value:g}",
        "files-sprawl",
    )


def deliveries_for(alert: Alert) -> list[Delivery]:
    return list(Delivery.objects.filter(event__alert=alert).order_by("pk"))


@functools.lru_cache(maxsize=8)
def fetch_example(name: str, grown: bool) -> FetchResult:
    """One real fetch per example release per test session (the servers are deterministic)."""
    command, args, env = stdio_command(
        name, "--root", str(ROOT / "examples"), env={"MCP_EXAMPLE_GROWN": "1" if grown else "0"}
    )
    target = ServerTarget(transport="stdio", command=command, args=args, env=env)
    return fetch_tools_sync(
        target, connect_timeout=CONNECT_BUDGET, total_timeout=2 * CONNECT_BUDGET, max_bytes=5_000_000
    )


def stdio_server(team, name="files-sprawl", module="sprawling", tmp_path=None) -> McpServer:
    command, args, env = stdio_command(
        module, "--root", str(tmp_path or ROOT / "examples"), env={"MCP_EXAMPLE_GROWN": "0"}
    )
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.STDIO, command=command, args=args, env=env
    )


def set_grown(server: McpServer, grown: bool) -> None:
    server.env = {**server.env, "MCP_EXAMPLE_GROWN": "1" if grown else "0"}
    server.save(update_fields=["env"])


def poll(server: McpServer, capture):
    """Poll for real; run the on-commit work (evaluation, then delivery) as a commit would."""
    with capture(execute=True):
        summary = poll_server(server.pk, trigger="test")
    assert summary.outcome == "ok", summary.message
    return summary


def record(server: McpServer, name: str, grown: bool) -> Snapshot:
    """Store a snapshot from a real fetch without a subprocess per test, then evaluate it."""
    snapshot, _ = record_snapshot(server, fetch_example(name, grown))
    evaluate_snapshot(snapshot)
    snapshot.refresh_from_db()
    return snapshot


# The example sprawling server's fixed tax before and after its grown release (cl100k_base).
SPRAWL_V14, SPRAWL_V15 = 3188, 4125


def tools_list(name: str, grown: bool) -> dict:
    """The tools/list result a CI job would fetch from a server built from its branch."""
    result = fetch_example(name, grown)
    return {"tools": result.tools}


def post_check(client, token: str, body: dict):
    return client.post(
        "/api/v1/check",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
