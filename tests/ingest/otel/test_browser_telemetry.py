"""A person follows the set-up lines in real headless Chromium: from the Ingest page to the
telemetry page, a token created and shown once, the Claude Code lines copied into the environment
of the SDK's real exporter, and the agent's record appears on the page."""

from __future__ import annotations

import shlex

import pytest
from opentelemetry.sdk._logs.export import LogRecordExportResult

from ingest.capture.models import IngestJob
from tests.browser import browser_login
from tests.ingest.otel.exporters import fixture, records
from tests.ingest.otel.support import run_to_end

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def environment(lines: str) -> dict[str, str]:
    """The variables ``export`` lines set, as a shell would read them."""
    env: dict[str, str] = {}
    for line in lines.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["export"]:
            name, _, value = words[1].partition("=")
            env[name] = value
    return env


def test_following_the_set_up_lines_brings_the_agent_in(
    browser_page, live_server, team, alice, monkeypatch, tmp_path
):
    page = browser_page
    browser_login(page, live_server, "alice", "pw-for-tests-123")
    page.goto(f"{live_server.url}/t/{team.slug}/ingest/")
    page.click("#telemetry-source a.button")
    page.click("#telemetry-token-form button")
    page.wait_for_selector("#token-once")
    env = environment(page.inner_text("#claude-code-lines"))
    assert env["CLAUDE_CODE_ENABLE_TELEMETRY"] == "1" and env["OTEL_LOGS_EXPORTER"] == "otlp"
    assert env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] == f"{live_server.url}/api/v1/otel/v1/logs"
    assert env["OTEL_LOG_TOOL_DETAILS"] == "1"
    page.screenshot(path=str(tmp_path / "telemetry.png"), full_page=True)

    # The SDK's exporter configured by those lines alone, as any OTLP client would be.
    for name in (
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
    ):
        monkeypatch.setenv(name, env[name])
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

    exporter = OTLPLogExporter()
    assert exporter.export(records(fixture("claude_code_session.json"))) == LogRecordExportResult.SUCCESS
    exporter.shutdown()
    job = run_to_end(IngestJob.objects.get(team=team, source="otel").pk)  # the worker's part
    assert job.stored == 7

    page.goto(f"{live_server.url}/t/{team.slug}/ingest/telemetry/")
    row = page.locator('#telemetry-agents tr[data-agent="claude-code"]')
    assert "claude-code 2.1.220" in row.inner_text() and "claude_code.tool_result" in row.inner_text()
    # The token is not shown again.
    assert page.locator("#token-once").count() == 0
    assert page.js_errors == [] and page.foreign_requests == []
