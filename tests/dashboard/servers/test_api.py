"""The fixed-tax endpoints of the JSON API."""

from __future__ import annotations

from tests.dashboard.alerts.factories import (
    SPRAWL_V14,
)


def test_servers_and_snapshots_endpoints(client, gated):
    server, token = gated
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    servers = client.get("/api/v1/servers", **auth).json()
    assert [s["name"] for s in servers] == ["files-sprawl"]
    assert servers[0]["current"]["fixed_tax_tokens"] == SPRAWL_V14
    page = client.get(f"/api/v1/servers/{server.name}/snapshots?limit=1", **auth).json()
    assert page["count"] == 1 and page["items"][0]["version"] == "1.4.0"
