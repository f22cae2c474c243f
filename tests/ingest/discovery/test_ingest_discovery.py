"""Discovery through the ingest pipeline: `manage.py ingest FILE --json` reports what the file
added, the rows are stored once however often the file is read, and the session's loads are derived."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from ingest.capture.models import CaptureSession, ToolCall
from ingest.discovery.models import DiscoveryLoad, DiscoverySearch, SessionDiscoverySummary

LOGS = Path(__file__).resolve().parents[2] / "data" / "logs"


def ingest(name: str) -> dict:
    out = StringIO()
    call_command("ingest", str(LOGS / name), "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.django_db
def test_transcript_discovery_is_reported_and_stored_once(team):
    summary = ingest("claude_code_tool_search.jsonl")
    assert summary["calls_stored"] == 4
    assert summary["discovery"] == {
        "searches": 4,
        "misses": 1,
        "loads": 4,
        "loads_never_called": 2,
        "calls": 4,
        "requests": 9,
        "compactions": 1,
    }
    session = CaptureSession.objects.get(session_key="5b1d7c2e-8f3a-4c6d-9e0b-2a4f6c8e0d13")
    figures = SessionDiscoverySummary.objects.get(session=session)
    assert (figures.total_deferred, figures.calls_without_load, figures.requests) == (117, 1, 9)
    assert list(
        DiscoveryLoad.objects.filter(session=session).values_list("tool", "calls", "requests_after")
    ) == [
        ("mcp__echo__echo", 2, 8),
        ("mcp__calc__add", 1, 5),
        ("mcp__calc__multiply", 0, 1),
        ("mcp__calc__multiply", 0, 2),
    ]
    assert set(DiscoveryLoad.objects.values_list("server_label", flat=True)) == {"echo", "calc"}

    again = ingest("claude_code_tool_search.jsonl")
    assert again["calls_stored"] == 0
    assert again["discovery"] == dict.fromkeys(summary["discovery"], 0)
    assert DiscoverySearch.objects.count() == 4 and DiscoveryLoad.objects.count() == 4
    assert ToolCall.objects.count() == 4


@pytest.mark.django_db
def test_a_malformed_tool_search_line_is_quarantined_with_its_reason(team):
    summary = ingest("claude_code_tool_search_malformed.jsonl")
    assert summary["quarantined_reasons"] == {
        "malformed_tool_search: toolUseResult.matches is not a list of names": 1
    }
    assert summary["calls_stored"] == 2
    assert summary["discovery"]["searches"] == 0 and summary["discovery"]["calls"] == 2


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["anthropic_tool_search.jsonl", "anthropic_tool_search.har"])
def test_anthropic_api_traffic_through_the_proxy_and_as_a_har(team, name):
    summary = ingest(name)
    assert summary["ok"] is True and summary["calls_stored"] == 0
    assert summary["discovery"] == {
        "searches": 2,
        "misses": 1,
        "loads": 2,
        "loads_never_called": 1,
        "calls": 2,
        "requests": 3,
        "compactions": 0,
    }
    figures = SessionDiscoverySummary.objects.get()
    assert (figures.total_deferred, figures.calls_without_load) == (3, 1)
    # Read again (the same capture uploaded twice): nothing is stored twice.
    again = ingest(name)
    assert again["discovery"] == dict.fromkeys(summary["discovery"], 0)
    assert (DiscoverySearch.objects.count(), DiscoveryLoad.objects.count()) == (2, 2)


@pytest.mark.django_db
def test_the_job_page_says_what_discovery_the_file_added(alice_client, team):
    summary = ingest("claude_code_tool_search.jsonl")
    html = alice_client.get(reverse("ingest_job", args=[team.slug, summary["job"]])).content.decode()
    text = " ".join(re.search(r'id="job-discovery">(.*?)</p>', html, re.S).group(1).split())
    assert text.startswith(
        "Tool discovery: 4 searches (1 found nothing), 4 loads (2 never called), 4 tool calls, 9 model requests."
    )


@pytest.mark.django_db
def test_a_stream_json_session_without_times_counts_from_when_it_was_stored(team):
    before = timezone.now()
    summary = ingest("claude_code_stream_tool_search.jsonl")
    assert summary["discovery"] == {
        "searches": 3,
        "misses": 1,
        "loads": 2,
        "loads_never_called": 1,
        "calls": 2,
        "requests": 5,
        "compactions": 1,
    }
    figures = SessionDiscoverySummary.objects.get()
    assert figures.first_at >= before and (figures.loads, figures.requests, figures.total_deferred) == (
        2,
        5,
        42,
    )
