"""``GET /api/v1/fidelity``: per-agent figures of the scripted agent's traffic, token auth, periods."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.timeout(300)]


def test_api_fidelity_summary(client, fidelity_team, team_token):
    _, plaintext = team_token
    response = client.get("/api/v1/fidelity", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200
    body = response.json()
    by_version = {a["version"]: a for a in body["agents"]}
    assert body["days"] == 30
    assert by_version["2.0.14"]["exact_rate"] == 50.0 and by_version["2.0.14"]["reference_calls"] == 1
    assert by_version["2.0.15"]["verdicts"] == {
        "line_endings": 1,
        "truncated": 1,
        "mutated": 1,
        "unverifiable": 1,
    }
    assert client.get("/api/v1/fidelity?days=3", HTTP_AUTHORIZATION=f"Bearer {plaintext}").status_code == 400
    assert client.get("/api/v1/fidelity").status_code == 401
    assert "/api/v1/fidelity" in client.get("/api/v1/openapi.json").json()["paths"]
