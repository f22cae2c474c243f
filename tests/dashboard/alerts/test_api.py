"""Limits of the CI gate endpoint (dashboard.alerts.api): size, tool count, rate and time budget.

Real tools/list results of the example servers; a body exactly at a limit is still judged.
"""

from __future__ import annotations

import json

from dashboard.teams.models import ApiToken
from tests.dashboard.alerts.factories import SPRAWL_V15, post_check, tools_list

CHECK = "/api/v1/check"


def _raw_post(client, token: str, data: bytes):
    return client.post(
        CHECK, data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_a_body_over_gate_max_bytes_is_refused_unread_and_one_at_the_limit_is_judged(client, gated, settings):
    server, token = gated
    data = json.dumps({"server": server.name, "tools_list": tools_list("sprawling", True)}).encode()
    settings.GATE_MAX_BYTES = len(data)
    at_limit = _raw_post(client, token, data)
    assert at_limit.status_code == 200, at_limit.content
    assert at_limit.json()["totals"]["fixed_tax_tokens"] == SPRAWL_V15

    settings.GATE_MAX_BYTES = len(data) - 1
    over = _raw_post(client, token, data)
    assert over.status_code == 413
    detail = over.json()["detail"]
    assert "GATE_MAX_BYTES" in detail and f"{len(data) - 1:,} bytes" in detail
    # Refused before parsing: not even invalid JSON gets as far as a 422.
    garbage = _raw_post(client, token, b"{" * len(data))
    assert garbage.status_code == 413


def test_a_list_over_gate_max_tools_is_refused_and_one_at_the_limit_is_judged(client, gated, settings):
    server, token = gated
    body = {"server": server.name, "tools_list": tools_list("sprawling", True)}
    count = len(body["tools_list"]["tools"])
    settings.GATE_MAX_TOOLS = count
    at_limit = post_check(client, token, body)
    assert at_limit.status_code == 200, at_limit.content
    assert at_limit.json()["totals"]["tool_count"] == count

    settings.GATE_MAX_TOOLS = count - 1
    over = post_check(client, token, body)
    assert over.status_code == 413
    assert over.json()["detail"] == (
        f"tools_list: the candidate lists {count} tools; the gate judges at most {count - 1} (GATE_MAX_TOOLS)."
    )


def test_the_gate_is_rate_limited_per_token_with_retry_after(client, gated, team, settings, rate_clock):
    server, token = gated
    settings.GATE_RATE_PER_MINUTE = 2
    body = {"server": server.name, "tools_list": tools_list("sprawling", False)}
    assert [post_check(client, token, body).status_code for _ in range(2)] == [200, 200]
    limited = post_check(client, token, body)
    assert limited.status_code == 429
    assert limited["Retry-After"] == "51"  # 10 s into the minute: 50 s left, rounded up
    assert "2 check requests per minute" in limited.json()["detail"]
    assert "GATE_RATE_PER_MINUTE" in limited.json()["detail"]
    _, other_token = ApiToken.issue(team, "second")
    assert post_check(client, other_token, body).status_code == 200


def test_findings_past_the_time_budget_answer_status_error_with_the_figures_and_verdict(
    client, gated, settings
):
    server, token = gated
    settings.GATE_TIME_BUDGET_SECONDS = 0  # the deadline has passed before the findings start
    response = post_check(client, token, {"server": server.name, "tools_list": tools_list("sprawling", True)})
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["status"] == "error"
    assert result["errors"] == [
        "findings: not finished within the time budget of 0 s (GATE_TIME_BUDGET_SECONDS)"
    ]
    assert result["findings"] == []
    # The exact figures and the budgets' verdict do not depend on the findings.
    assert result["totals"]["fixed_tax_tokens"] == SPRAWL_V15
    assert result["verdict"] == "fail"
    assert "time budget of 0 s" in result["report"]


def test_a_malformed_body_is_still_a_422_naming_the_field(client, gated):
    _, token = gated
    response = _raw_post(client, token, json.dumps({"tools_list": []}).encode())
    assert response.status_code == 422
    assert any(e["loc"] == ["body", "payload", "server"] for e in response.json()["detail"])
    assert _raw_post(client, token, b"not json").status_code == 422


def test_gate_work_per_token_per_minute_is_bounded_with_retry_after(client, gated, team, settings):
    """Requests within GATE_RATE_PER_MINUTE still cost seconds each; their sum per token and minute
    is bounded (GATE_WORK_SECONDS_PER_MINUTE), so one token's stream cannot hold the web workers."""
    server, token = gated
    settings.GATE_RATE_PER_MINUTE = 1000
    settings.GATE_WORK_SECONDS_PER_MINUTE = 0.001  # the first check alone spends it
    body = {"server": server.name, "tools_list": tools_list("sprawling", True)}
    assert post_check(client, token, body).status_code == 200
    limited = post_check(client, token, body)
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 61
    assert "GATE_WORK_SECONDS_PER_MINUTE" in limited.json()["detail"]
    _, other_token = ApiToken.issue(team, "second")  # the budget is per token
    assert post_check(client, other_token, body).status_code == 200


def test_a_chunked_check_body_is_read_like_the_ingest_apis(gunicorn_url, gated, settings):
    """Under gunicorn a chunked body has no Content-Length; it was read as empty (422)."""
    import http.client

    server, token = gated
    data = json.dumps({"server": server.name, "tools_list": tools_list("sprawling", True)}).encode()

    def post(blocks: list[bytes]) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(*gunicorn_url, timeout=60)
        conn.request(
            "POST",
            CHECK,
            body=iter(blocks),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = conn.getresponse()
        answer = (response.status, json.loads(response.read()))
        conn.close()
        return answer

    status, body = post([data[i : i + 4096] for i in range(0, len(data), 4096)])
    assert status == 200, body
    assert body["totals"]["fixed_tax_tokens"] == SPRAWL_V15
    settings.GATE_MAX_BYTES = len(data) - 1  # chunked past the limit: 413, as with a Content-Length
    status, body = post([data[i : i + 4096] for i in range(0, len(data), 4096)])
    assert status == 413 and "GATE_MAX_BYTES" in body["detail"]
