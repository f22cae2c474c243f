"""Registering a reference document re-judges earlier pastes, and the new verdicts go through the
same fidelity alert rules an ingest runs: the agent's exact rate falls to 25 %, the alert opens and
the team's webhook (a real local receiver) gets it, with no later ingest needed.

A Claude Code transcript carries no expected hash, so its four pastes of one document are
"unverifiable" until the document is registered; then they read exact, truncated, mutated and
line endings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from dashboard.alerts.models import Alert, AlertState, Budget, Level, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind, Delivery, DeliveryStatus
from ingest.capture import pipeline
from ingest.capture.models import BulkArgument
from ingest.fidelity import views as fidelity_views
from ingest.fidelity.models import ReferenceDocument
from tests.helpers import Receiver, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]

DOC = "".join(f"step {i}: read the log, find the cause, fix it, run it again.\n" for i in range(60))
PASTES = {
    "exact": DOC,
    "truncated": DOC[:1500],
    "mutated": DOC.replace("step 7:", "step seven:", 1),
    "line_endings": DOC.replace("\n", "\r\n"),
}


def claude_code_transcript(path: Path) -> Path:
    """A Claude Code session: each paste a `tool_use` of mcp__files__write_file, then its result."""
    session = "5b0c6a52-1b6e-4e47-b2a3-5f0d39c1a7e4"
    lines = []
    for n, content in enumerate(PASTES.values()):
        use_id = f"toolu_{n:024d}"
        base = {"sessionId": session, "version": "2.0.14", "cwd": "/srv", "isSidechain": False}
        lines.append(
            {
                **base,
                "type": "assistant",
                "uuid": f"a{n}",
                "timestamp": f"2026-11-30T08:00:{10 + 2 * n:02d}.000Z",
                "message": {
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5-20250929",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": use_id,
                            "name": "mcp__files__write_file",
                            "input": {"path": f"/srv/doc{n}.md", "content": content},
                        }
                    ],
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 6, "output_tokens": 900},
                },
            }
        )
        lines.append(
            {
                **base,
                "type": "user",
                "uuid": f"u{n}",
                "timestamp": f"2026-11-30T08:00:{11 + 2 * n:02d}.000Z",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": use_id,
                            "type": "tool_result",
                            "content": [{"type": "text", "text": "ok"}],
                        }
                    ],
                },
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _rules_and_hook(team, hook: Receiver) -> Channel:
    Budget.objects.create(team=team, measure=Measure.AGENT_EXACT_RATE, level=Level.ERROR, limit=50, window=20)
    return Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})


def _ingest_transcript(team, tmp_path: Path) -> None:
    job = pipeline.ingest_path(team, claude_code_transcript(tmp_path / "session.jsonl"))
    assert job.status == "done", job.error
    verdicts = sorted(BulkArgument.objects.filter(team=team).values_list("verdict", flat=True))
    assert verdicts == ["unverifiable"] * 4
    assert not Alert.objects.filter(team=team).exists()  # nothing judged yet, so no rate


def _register_on_the_page(alice_client, team) -> None:
    response = alice_client.post(
        reverse("fidelity_references", args=[team.slug]),
        {"action": "upload", "file": SimpleUploadedFile("runbook.md", DOC.encode())},
    )
    assert response.status_code == 302
    assert ReferenceDocument.objects.filter(team=team).count() == 1


def _assert_alert_and_webhook(team, hook: Receiver) -> None:
    verdicts = sorted(BulkArgument.objects.filter(team=team).values_list("verdict", flat=True))
    assert verdicts == ["exact", "line_endings", "mutated", "truncated"]
    alert = Alert.objects.get(team=team, measure=Measure.AGENT_EXACT_RATE)
    assert alert.state == AlertState.ACTIVE and alert.level == Level.ERROR
    assert alert.value == 25.0  # one exact among four judged
    wait_until(
        lambda: Delivery.objects.filter(event__alert=alert, status=DeliveryStatus.SENT).exists(),
        timeout=60,
        message="the webhook delivery",
    )
    assert len(hook.delivered) == 1
    assert hook.json()["alert"]["id"] == str(alert.code)


def test_registering_the_document_opens_the_alert_and_fires_the_webhook(
    alice_client, team, tmp_path, eager_celery
):
    with Receiver() as hook:
        _rules_and_hook(team, hook)
        _ingest_transcript(team, tmp_path)
        _register_on_the_page(alice_client, team)  # a small team: re-judged inside the request
        _assert_alert_and_webhook(team, hook)


@pytest.mark.services
def test_a_worker_rejudging_for_the_document_opens_the_alert(
    postgres_and_redis, celery_worker_process, alice_client, team, tmp_path, monkeypatch
):
    # Above the inline limit the page hands the re-judging to the ingest queue's worker.
    monkeypatch.setattr(fidelity_views, "INLINE_REJUDGE_MAX_CONTENTS", 0)
    with Receiver() as hook:
        _rules_and_hook(team, hook)
        _ingest_transcript(team, tmp_path)
        _register_on_the_page(alice_client, team)
        wait_until(
            lambda: Alert.objects.filter(team=team, measure=Measure.AGENT_EXACT_RATE).exists(),
            timeout=60,
            message="the worker's re-judging and its alert",
        )
        _assert_alert_and_webhook(team, hook)
