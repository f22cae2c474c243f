"""Deleting a server while its poll runs: the poll ends quietly ("deleted"), it does not fail the
task with an IntegrityError (its PollRun and snapshot had no server left to belong to)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from dashboard.servers.models import McpServer, PollRun, Snapshot, Transport
from dashboard.tasks import poll as poll_server
from tests.conftest import ROOT
from tests.helpers import wait_until

# A real stdio MCP server that first waits for a file: the test deletes the server in between.
WAIT_THEN_SERVE = (
    "import os, runpy, sys, time\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def _waiting_server(team, go: Path) -> McpServer:
    """A stdio server whose process serves only once the file ``go`` exists."""
    series = str(Path(ROOT) / "tests" / "servers" / "series_server.py")
    return McpServer.objects.create(
        team=team,
        name="short-lived",
        transport=Transport.STDIO,
        command=sys.executable,
        args=["-c", WAIT_THEN_SERVE, str(go), series],
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_server_deleted_during_its_poll_ends_the_poll_quietly(team, tmp_path):
    go = tmp_path / "go"
    server = _waiting_server(team, go)
    outcome = _poll_while_deleting(server, go)
    assert "error" not in outcome, repr(outcome.get("error"))
    summary = outcome["summary"]
    assert (summary.outcome, summary.skipped, summary.snapshot_id) == ("deleted", True, None)
    assert "deleted during its poll" in summary.message
    assert not PollRun.objects.exists() and not Snapshot.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_server_deleted_during_an_unchanged_poll_ends_the_poll_quietly(team, tmp_path):
    # The second poll finds the same tools: it ends with the write that extends the snapshot,
    # records the run and releases the lock (one statement on PostgreSQL), with no server left.
    go = tmp_path / "go"
    go.touch()
    server = _waiting_server(team, go)
    first = poll_server(server.pk, trigger="manual")
    assert first.changed, first.message
    go.unlink()
    outcome = _poll_while_deleting(server, go)
    assert "error" not in outcome, repr(outcome.get("error"))
    summary = outcome["summary"]
    assert (summary.outcome, summary.skipped, summary.snapshot_id) == ("deleted", True, None)
    assert not PollRun.objects.exists() and not Snapshot.objects.exists()


def _poll_while_deleting(server: McpServer, go: Path) -> dict[str, object]:
    outcome: dict[str, object] = {}

    def poll() -> None:
        try:
            outcome["summary"] = poll_server(server.pk, trigger="manual")
        except BaseException as exc:  # noqa: BLE001 - what the task would have died of
            outcome["error"] = exc
        finally:
            from django.db import connection

            connection.close()

    thread = threading.Thread(target=poll)
    thread.start()
    wait_until(
        lambda: McpServer.objects.filter(pk=server.pk, polling_since__isnull=False).exists(),
        timeout=30,
        message="the poll to take its lock",
    )
    server.delete()  # the user deletes it from the page while it is being polled
    go.touch()
    thread.join(timeout=90)
    return outcome


@pytest.mark.django_db(transaction=True)
def test_a_server_deleted_right_after_its_poll_claimed_it_ends_the_poll_quietly(team, monkeypatch):
    # The user's delete lands between the claim and the poll's read of the server (CI saw it).
    # On PostgreSQL the two are one statement, with no moment in between: the test takes the
    # two-statement path there too.
    from dashboard.servers import polling, pollsql

    monkeypatch.setattr(pollsql, "available", lambda: False)

    server = McpServer.objects.create(
        team=team, name="gone", transport=Transport.STDIO, command=sys.executable
    )
    real_claim = polling.claim

    def claim_then_deleted(server_id: int, lease: str, now: object = None) -> bool:
        claimed = real_claim(server_id, lease, now)
        McpServer.objects.filter(pk=server_id).delete()
        return claimed

    monkeypatch.setattr(polling, "claim", claim_then_deleted)
    summary = poll_server(server.pk, trigger="manual")
    assert (summary.outcome, summary.skipped, summary.snapshot_id) == ("deleted", True, None)
    assert summary.message == "the server was deleted during its poll"
    assert not PollRun.objects.exists()
    # And a poll of a server deleted before it ran at all.
    monkeypatch.setattr(polling, "claim", real_claim)
    late = poll_server(server.pk, trigger="schedule")
    assert (late.outcome, late.message) == ("deleted", "the server no longer exists")
