"""Advice from the team's sessions (keep eager, remove unused, rename after misses) with its
savings, and the alert on a release after which a tool's load-to-call rate falls."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.alerts.models import Alert, Measure
from dashboard.alerts.notify.models import Channel, ChannelKind
from ingest.capture.pipeline import ingest_path
from ingest.discovery.advice import KEEP_EAGER, REMOVE_UNUSED, RENAME_MISSED, history_advice
from ingest.discovery.figures import Catalog
from tests.dashboard.factories import http_server, independent_tokens, record, tool
from tests.helpers import Receiver, tiktoken_reference
from tests.ingest.discovery.sessions import Transcript, write

pytestmark = pytest.mark.django_db

ADD = tool("add", "Add two numbers.", {"a": {"type": "number"}, "b": {"type": "number"}})
MUL = tool("multiply", "Multiply two numbers.", {"a": {"type": "number"}, "b": {"type": "number"}})
ADD_NAME = "mcp__calc__add"


def definition(raw: dict) -> int:
    return independent_tokens(
        {
            "name": f"mcp__calc__{raw['name']}",
            "description": raw["description"],
            "input_schema": raw["inputSchema"],
        }
    )


def test_advice_from_four_sessions(team, tmp_path, settings):
    settings.DISCOVERY_UNUSED_SESSIONS = 4
    server = http_server(team, "calc")
    record(server, [ADD, MUL], "1.0")
    start = timezone.now() - timedelta(days=2)
    sessions = [
        # a miss, then add found and called: 4 requests, add loaded before the 3rd
        Transcript("s1", start)
        .search("sum numbers")
        .search("select:" + ADD_NAME, ADD_NAME)
        .call(ADD_NAME)
        .text(),
        Transcript("s2", start).search("select:" + ADD_NAME, ADD_NAME).call(ADD_NAME).text(),
        Transcript("s3", start).search("select:" + ADD_NAME, ADD_NAME).call(ADD_NAME).text(),
        Transcript("s4", start).search("select:" + ADD_NAME, ADD_NAME).call(ADD_NAME).text(),
    ]
    job = ingest_path(team, write(tmp_path / "s.jsonl", sessions))
    assert job.status == "done", job.error

    advice = {(a.kind, a.tool): a for a in history_advice(Catalog(team), None, "calc")}
    # multiply: never loaded nor called in the last 4 sessions: its whole definition per request
    remove = advice[(REMOVE_UNUSED, "multiply")]
    assert remove.saving_tokens == definition(MUL) and remove.per == "request"
    # add: called in 4 of 4. Deferred it costs its name-list entry in every request plus its
    # definition in the requests after its load; eager, its definition in every request.
    keep = advice[(KEEP_EAGER, "add")]
    entry = len(tiktoken_reference("cl100k_base").encode_ordinary(ADD_NAME + "\n"))  # its name-list line
    per_session = [
        entry * 4 + definition(ADD) * 2 - definition(ADD) * 4,  # s1: 4 requests, 2 after the load
        entry * 3 + definition(ADD) * 2 - definition(ADD) * 3,  # s2..s4: 3 requests, 2 after
        entry * 3 + definition(ADD) * 2 - definition(ADD) * 3,
        entry * 3 + definition(ADD) * 2 - definition(ADD) * 3,
    ]
    assert keep.saving_tokens == round(sum(per_session) / 4) and keep.per == "session"
    rename = advice[(RENAME_MISSED, None)]
    assert '"sum numbers"' in rename.message and "1 search " in rename.message


def _ingest_sessions(team, tmp_path, name, start, calls: list[bool]):
    sessions = []
    for i, called in enumerate(calls):
        t = Transcript(f"{name}{i}", start + timedelta(minutes=i)).search("select:" + ADD_NAME, ADD_NAME)
        sessions.append(t.call(ADD_NAME).text() if called else t.text())
    job = ingest_path(team, write(tmp_path / f"{name}.jsonl", sessions))
    assert job.status == "done", job.error


def test_a_release_after_which_the_load_to_call_rate_falls_alerts_through_the_channels(
    team, tmp_path, settings, django_capture_on_commit_callbacks, eager_celery
):
    settings.DISCOVERY_RATE_MIN_LOADS = 5
    settings.DISCOVERY_RATE_DROP_POINTS = 20
    now = timezone.now()
    server = http_server(team, "calc")
    record(server, [ADD, MUL], "1.0", when=now - timedelta(days=20))
    renamed = tool("add", "Combine values.", {"a": {"type": "number"}, "b": {"type": "number"}})
    release = record(server, [renamed, MUL], "1.1", when=now - timedelta(days=5))
    with Receiver() as hook:
        Channel.objects.create(team=team, name="hook", kind=ChannelKind.WEBHOOK, config={"url": hook.url})
        with django_capture_on_commit_callbacks(execute=True):
            _ingest_sessions(team, tmp_path, "before", now - timedelta(days=10), [True] * 5)  # 100%
        assert not Alert.objects.filter(measure=Measure.LOAD_TO_CALL_DROP).exists()
        assert hook.requests == []
        with django_capture_on_commit_callbacks(execute=True):
            _ingest_sessions(
                team, tmp_path, "after", now - timedelta(days=2), [True, False, False, False, False]
            )  # 20%
        alert = Alert.objects.get(measure=Measure.LOAD_TO_CALL_DROP)
        assert alert.rule_key == f"tool:calc/add:load_to_call_drop:{release.pk}"
        assert (alert.value, alert.limit, alert.snapshot_id, alert.server_id) == (
            80.0,
            20,
            release.pk,
            server.pk,
        )
        assert "down 80.0 points" in alert.message
        # The team's webhook got it, as it gets every other alert.
        assert len(hook.requests) == 1
        sent = hook.json()
        assert (sent["event"], sent["alert"]["measure"]) == ("alert.opened", "load_to_call_drop")
        assert sent["alert"]["rule_key"] == alert.rule_key


def test_too_few_loads_after_the_release_open_nothing(team, tmp_path, settings):
    settings.DISCOVERY_RATE_MIN_LOADS = 5
    now = timezone.now()
    server = http_server(team, "calc")
    record(server, [ADD], "1.0", when=now - timedelta(days=20))
    record(server, [ADD, MUL], "1.1", when=now - timedelta(days=5))
    _ingest_sessions(team, tmp_path, "before", now - timedelta(days=10), [True] * 5)
    _ingest_sessions(team, tmp_path, "after", now - timedelta(days=2), [False] * 4)
    assert not Alert.objects.filter(measure=Measure.LOAD_TO_CALL_DROP).exists()


@pytest.mark.slow
def test_the_dashboard_and_measure_history_give_the_same_advice(team, tmp_path, settings):
    """One rule set: the team's stored sessions and `mcp-tax measure --history` reading the same
    transcripts give the same history advice, word for word, for the real files-lean server."""
    import json

    from dashboard.servers.polling import record_snapshot
    from tests.mcptax.cli.support import fetched, mcp_tax, server_entry, write_config
    from tests.mcptax.cli.test_history import HISTORY

    settings.DISCOVERY_UNUSED_SESSIONS = 4
    server = http_server(team, "lean")
    record_snapshot(server, fetched("lean"), seen_at=timezone.now())
    for path in sorted(HISTORY.iterdir()):
        job = ingest_path(team, path)
        assert job.status == "done", job.error
    stored = [a.to_dict() for a in history_advice(Catalog(team), None, "lean") if a.source == "history"]

    config = write_config(tmp_path / "mcp.json", {"lean": server_entry("lean")})
    run = mcp_tax("measure", str(config), "--json", "--history", str(HISTORY), "--unused-sessions", "4")
    assert run.returncode == 0, run.stderr
    read = json.loads(run.stdout)["stacks"][0]["advice"]
    assert {a["kind"] for a in stored} == {"keep_eager", "remove_unused", "rename_missed"}
    assert stored == read


def test_the_settings_default_to_the_rules_defaults():
    from ingest.discovery.advice import rules
    from mcptax.advice import HistoryRules

    assert rules() == HistoryRules()
