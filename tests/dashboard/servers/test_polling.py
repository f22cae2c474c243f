"""The fixed-tax pipeline against real example MCP servers (real processes, real sockets)."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from dashboard.servers.models import McpServer, PollRun, Snapshot, Transport
from dashboard.servers.polling import claim, dispatch_due
from dashboard.servers.signals import snapshot_recorded
from dashboard.tasks import dispatch_due_polls
from dashboard.tasks import poll as poll_server
from examples.servers.launch import serve_http, stdio_command
from examples.servers.misbehaving import QUIRKY_PAGES
from mcptax import tokens
from tests.dashboard.factories import (
    http_server,
    independent_tax,
    independent_tool_tokens,
    record,
    send_sentinels_through_every_queue,
)
from tests.helpers import CONNECT_BUDGET, compact, sha, wait_until

pytestmark = pytest.mark.django_db


def _stdio_server(team, name: str, module: str, *args: str, env=None) -> McpServer:
    command, argv, child_env = stdio_command(module, *args, env=env)
    return McpServer.objects.create(
        team=team, name=name, transport=Transport.STDIO, command=command, args=argv, env=child_env
    )


def test_stdio_poll_stores_a_snapshot_and_an_unchanged_poll_only_extends_it(team):
    server = _stdio_server(team, "sprawl", "sprawling")
    first = poll_server(server.pk)
    assert first.outcome == "ok", first.message
    assert first.changed
    snap = Snapshot.objects.get(pk=first.snapshot_id)
    assert snap.server_version == "1.4.0" and snap.server_name
    assert snap.tool_count == len(snap.tools_raw) == snap.tools.count() >= 14
    assert snap.fixed_tax_tokens == independent_tax(snap.tools_raw)
    # Each stored tool's tokens, and the overhead between them, against tiktoken directly.
    per_tool = independent_tool_tokens(snap.tools_raw)
    assert dict(snap.tools.values_list("name", "tokens")) == per_tool
    assert snap.overhead_tokens == independent_tax(snap.tools_raw) - sum(per_tool.values())
    assert snap.sha256 == tokens.snapshot_sha256(snap.tools_raw)
    assert snap.instructions_tokens == tokens.count(snap.instructions)
    assert snap.findings, "the sprawling server has findings"

    seen = snap.last_seen
    second = poll_server(server.pk)
    assert second.outcome == "ok" and not second.changed
    assert Snapshot.objects.filter(server=server).count() == 1
    snap.refresh_from_db()
    assert snap.last_seen > seen
    assert PollRun.objects.filter(server=server, outcome="ok").count() == 2


def test_grown_release_adds_a_snapshot_with_the_new_version_and_a_larger_tax(team):
    server = _stdio_server(team, "sprawl", "sprawling")
    base = Snapshot.objects.get(pk=poll_server(server.pk).snapshot_id)
    server.env = {**server.env, "MCP_EXAMPLE_GROWN": "1"}
    server.save()
    grown_summary = poll_server(server.pk)
    assert grown_summary.changed
    grown = Snapshot.objects.get(pk=grown_summary.snapshot_id)
    assert grown.server_version != base.server_version
    assert grown.is_release and grown.previous_id == base.pk
    assert grown.fixed_tax_tokens > base.fixed_tax_tokens
    assert grown.tool_count > base.tool_count
    server.refresh_from_db()
    assert server.current_snapshot_id == grown.pk
    # Both raw lists are kept, once each.
    assert grown.document_id != base.document_id


@pytest.mark.slow
def test_http_poll_of_the_lean_server_and_pagination_gives_the_same_identity(team):
    with serve_http("lean") as url:
        server = McpServer.objects.create(team=team, name="lean", transport=Transport.HTTP, url=url)
        summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    lean = Snapshot.objects.get(pk=summary.snapshot_id)
    assert lean.server_version == "2.0.0"
    assert lean.fixed_tax_tokens == independent_tax(lean.tools_raw)
    assert not [f for f in lean.findings if f["kind"] in ("near_duplicate_tools", "bulk_without_reference")]

    whole = _stdio_server(team, "whole", "sprawling")
    paged = _stdio_server(team, "paged", "sprawling", "--page-size", "4")
    a = Snapshot.objects.get(pk=poll_server(whole.pk).snapshot_id)
    b = Snapshot.objects.get(pk=poll_server(paged.pk).snapshot_id)
    assert a.sha256 == b.sha256 and b.tool_count == a.tool_count
    assert a.document_id == b.document_id  # the raw JSON is stored once per distinct sha


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [
        pytest.param("hang", "timeout", marks=pytest.mark.slow),
        # The process died mid-answer: that, and only that, is `crashed`.
        ("exit_mid", "crashed"),
        ("invalid_json", "protocol_error"),
        ("huge", "refused_too_large"),
    ],
)
def test_faults_are_recorded_not_fatal(team, settings, mode, outcome):
    # Only the hang waits for a budget (and is a timeout however slow the start); every other fault
    # ends the poll at once, so its budget is the suite's roomy one: a 3 s budget turned a slow
    # start on a loaded machine into `timeout`.
    settings.POLL_CONNECT_TIMEOUT = 3 if mode == "hang" else CONNECT_BUDGET
    settings.POLL_TOTAL_TIMEOUT = 4 if mode == "hang" else 2 * CONNECT_BUDGET
    settings.POLL_MAX_BYTES = 1024 * 1024
    bad = _stdio_server(team, f"bad-{mode}", "misbehaving", "--mode", mode)
    summary = poll_server(bad.pk)
    assert summary.outcome == outcome, summary.message
    assert summary.message
    run = PollRun.objects.get(server=bad)
    assert run.outcome == summary.outcome and run.snapshot is None
    bad.refresh_from_db()
    assert bad.last_outcome == summary.outcome and bad.polling_since is None
    assert bad.next_poll_at > timezone.now()
    assert not Snapshot.objects.filter(server=bad).exists()
    if mode == "huge":
        assert "1048576" in summary.message and "refused" in summary.message
    if mode == "exit_mid":
        assert "exited with code 3" in summary.message
    # A healthy server polls fine afterwards (with room to start on a loaded machine: the short
    # timeouts above are for the faults, not for this).
    settings.POLL_TOTAL_TIMEOUT = settings.POLL_CONNECT_TIMEOUT = 2 * CONNECT_BUDGET
    good = _stdio_server(team, "good", "lean")
    assert poll_server(good.pk).outcome == "ok"


def test_transient_failures_back_off_and_success_resets(team, settings):
    settings.POLL_TOTAL_TIMEOUT = 3
    settings.POLL_CONNECT_TIMEOUT = 2
    server = McpServer.objects.create(
        team=team,
        name="down",
        transport=Transport.HTTP,
        url="http://127.0.0.1:9/mcp",
        poll_interval_seconds=3600,
    )
    delays = []
    for _ in range(3):
        before = timezone.now()
        assert poll_server(server.pk).outcome == "connect_error"
        server.refresh_from_db()
        delays.append((server.next_poll_at - before).total_seconds())
    assert [round(d / 30) for d in delays] == [1, 2, 4]
    assert server.consecutive_failures == 3


def test_a_server_is_never_polled_twice_at_once(team):
    server = _stdio_server(team, "sprawl", "sprawling")
    assert claim(server.pk)
    summary = poll_server(server.pk)
    assert summary.skipped and summary.outcome == "skipped"
    assert not PollRun.objects.filter(server=server).exists()
    # A lock left by a dead worker goes stale and is taken over.
    McpServer.objects.filter(pk=server.pk).update(polling_since=timezone.now() - timedelta(hours=1))
    assert poll_server(server.pk).outcome == "ok"


def test_dispatcher_enqueues_due_servers_once(team):
    due = _stdio_server(team, "due", "lean")
    later = _stdio_server(team, "later", "lean")
    off = _stdio_server(team, "off", "lean")
    McpServer.objects.filter(pk=later.pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    McpServer.objects.filter(pk=off.pk).update(enabled=False)
    sent: list[int] = []
    assert dispatch_due(enqueue=lambda pk, eta: sent.append(pk)) == [due.pk]
    assert dispatch_due(enqueue=lambda pk, eta: sent.append(pk)) == []
    assert sent == [due.pk]


@pytest.mark.slow
@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_real_worker_polls_and_survives_a_hanging_server(
    postgres_and_redis, celery_worker_process, team, settings
):
    from dashboard.tasks import poll_server as poll_server_task

    hang = _stdio_server(team, "hang", "misbehaving", "--mode", "hang")
    good = _stdio_server(team, "good", "lean")
    poll_server_task.delay(hang.pk)
    poll_server_task.delay(good.pk)

    def both_ran() -> dict[int, str] | None:
        runs = {r.server_id: r.outcome for r in PollRun.objects.filter(server__in=[hang, good])}
        return runs if len(runs) == 2 else None

    runs = wait_until(both_ran, timeout=120, message="a poll run of both servers")
    assert runs.get(good.pk) == "ok"
    assert runs.get(hang.pk) == "timeout"
    assert celery_worker_process.poll() is None, "the worker must keep running"
    poll_server_task.delay(good.pk)
    wait_until(
        lambda: PollRun.objects.filter(server=good).count() >= 2, timeout=120, message="the second poll"
    )
    assert PollRun.objects.filter(server=good, outcome="ok").count() == 2
    # Each message is delivered to one queue only: a mis-bound queue set would run it again. A
    # sentinel sent after it through every queue comes back only once the worker has taken what
    # was queued before it; then no further poll may have run or be running.
    send_sentinels_through_every_queue("after-polls")
    assert PollRun.objects.filter(server=good).count() == 2
    assert PollRun.objects.filter(server=hang).count() == 1
    assert not McpServer.objects.filter(pk__in=[hang.pk, good.pk], polling_since__isnull=False).exists()


def test_raw_tools_keep_the_servers_key_order_in_storage(team):
    # The quirky server sends its tools in two pages with keys in an unusual order and extension
    # keys: what is stored is exactly what it sent, key order included.
    server = _stdio_server(team, "quirky", "misbehaving", "--mode", "quirky")
    summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    fresh = Snapshot.objects.select_related("document").get(pk=summary.snapshot_id)
    sent = [tool for page in QUIRKY_PAGES for tool in page["tools"]]
    assert compact(fresh.tools_raw) == compact(sent)
    assert fresh.sha256 == sha(compact(sent))


def test_stored_text_keeps_key_orders_jsonb_would_change(team):
    # jsonb orders an object's keys shorter first; these come longer first at every level, so a
    # JSON column would reorder them. The stored text must keep them as received.
    tools = [
        {
            "inputSchema": {
                "properties": {"path": {"type": "string", "description": "where"}},
                "type": "object",
            },
            "description": "Reads a file.",
            "name": "read",
        }
    ]
    snapshot = record(http_server(team, "ordered"), tools, "1")
    with connection.cursor() as cursor:
        cursor.execute("SELECT raw_json FROM dashboard_toolsdocument WHERE id = %s", [snapshot.document_id])
        stored = cursor.fetchone()[0]
    assert stored == compact(tools)
    assert snapshot.sha256 == sha(compact(tools))


def test_beat_task_dispatches_due_servers_through_the_poll_task(team, eager_celery):
    due = _stdio_server(team, "due", "lean")
    later = _stdio_server(team, "later", "lean")
    McpServer.objects.filter(pk=later.pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    # Beat's task, in-process: dispatch_due hands each due server to the poll task's .delay.
    assert dispatch_due_polls.delay().get() == 1
    (run,) = PollRun.objects.filter(server=due)
    assert run.outcome == "ok" and run.trigger == "schedule"
    assert not PollRun.objects.filter(server=later).exists()
    assert dispatch_due_polls.delay().get() == 0


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_beat_task_through_the_real_worker_polls_each_due_server_once(
    postgres_and_redis, celery_worker_process, team
):
    due = _stdio_server(team, "due", "lean")
    later = _stdio_server(team, "later", "lean")
    McpServer.objects.filter(pk=later.pk).update(next_poll_at=timezone.now() + timedelta(hours=1))
    dispatch_due_polls.delay()  # through the broker, as beat sends it
    run = wait_until(lambda: PollRun.objects.filter(server=due).first(), timeout=120, message="the due poll")
    assert run.outcome == "ok" and run.trigger == "schedule"
    dispatch_due_polls.delay()  # the next tick: the server's next poll is not due yet
    send_sentinels_through_every_queue("dispatch")
    assert PollRun.objects.filter(server=due).count() == 1
    assert not PollRun.objects.filter(server=later).exists()
    assert not McpServer.objects.filter(pk=due.pk, polling_since__isnull=False).exists()


def _raise_type_error(*args, **kwargs):
    # Stands in for a bug in the analysis (the real one: an argument named `type`).
    raise TypeError("unhashable type: 'dict'")


def test_a_findings_bug_never_loses_the_count_and_is_shown(team, monkeypatch, alice_client, caplog):
    monkeypatch.setattr("mcptax.findings.analyze", _raise_type_error)
    server = _stdio_server(team, "lean", "lean")
    summary = poll_server(server.pk)
    assert summary.outcome == "ok", summary.message
    snap = Snapshot.objects.get(pk=summary.snapshot_id)
    assert snap.fixed_tax_tokens == independent_tax(snap.tools_raw)
    assert snap.tools.count() == snap.tool_count == len(snap.tools_raw)
    assert snap.findings == []
    assert [(e["stage"], e["error"]) for e in snap.analysis_errors] == [
        ("findings", "TypeError: unhashable type: 'dict'")
    ]
    assert "Traceback" in caplog.text and "unhashable" in caplog.text
    server.refresh_from_db()
    assert (server.last_outcome, server.consecutive_failures, server.current_snapshot_id) == (
        "ok",
        0,
        snap.pk,
    )
    html = alice_client.get(reverse("server_detail", args=[team.slug, server.code])).content.decode()
    assert "Findings could not be computed" in html and "TypeError: unhashable type: &#x27;dict&#x27;" in html


def test_the_poll_command_reports_an_analysis_failure_beside_exact_counts(team, monkeypatch):
    monkeypatch.setattr("mcptax.findings.analyze", _raise_type_error)
    _stdio_server(team, "lean", "lean")
    out, err = StringIO(), StringIO()
    call_command("poll", "lean", "--json", stdout=out, stderr=err)
    result = json.loads(out.getvalue())
    assert result["outcome"] == "ok"
    assert result["fixed_tax_tokens"] == independent_tax(Snapshot.objects.get(server__name="lean").tools_raw)
    assert result["analysis_errors"] == [{"stage": "findings", "error": "TypeError: unhashable type: 'dict'"}]
    assert "lean: findings failed: TypeError: unhashable type: 'dict'" in err.getvalue()


def test_an_alerting_bug_is_recorded_on_the_snapshot(team, monkeypatch, django_capture_on_commit_callbacks):
    def broken_receiver(sender, snapshot, **kwargs):
        raise RuntimeError("alert channel exploded")

    snapshot_recorded.connect(broken_receiver, dispatch_uid="test-broken")
    try:
        server = _stdio_server(team, "lean", "lean")
        with django_capture_on_commit_callbacks(execute=True):
            summary = poll_server(server.pk)
    finally:
        snapshot_recorded.disconnect(dispatch_uid="test-broken")
    assert summary.outcome == "ok"
    snap = Snapshot.objects.get(pk=summary.snapshot_id)
    assert snap.fixed_tax_tokens == independent_tax(snap.tools_raw)
    assert [(e["stage"], e["error"]) for e in snap.analysis_errors] == [
        ("broken_receiver", "RuntimeError: alert channel exploded")
    ]


def test_a_failure_of_ours_is_not_blamed_on_the_server(team, monkeypatch):
    def broken_store(*args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr("dashboard.servers.models.ToolsDocument.store", broken_store)
    server = _stdio_server(team, "lean", "lean")
    summary = poll_server(server.pk)
    assert summary.outcome == "internal_error"
    assert summary.message == "RuntimeError: database went away"
    server.refresh_from_db()
    assert server.last_outcome == "internal_error" and server.polling_since is None
