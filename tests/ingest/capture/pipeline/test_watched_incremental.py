"""A watched file is read on from its offset (ingest.capture.pipeline.watched): a scan parses only
the bytes appended since the last one, and what was pending at the offset still pairs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.capture import pipeline
from ingest.capture.models import ToolCall, WatchedFile, WatchedFolder
from tests.ingest.capture.logs import EnvelopeLog, assert_reconciles
from tests.mcptax.formats.helpers import LOGS


def _watched(folder: WatchedFolder, path: Path) -> WatchedFile:
    st = os.stat(path)
    obj, _ = WatchedFile.objects.get_or_create(
        folder=folder, device=st.st_dev, inode=st.st_ino, defaults={"path": str(path)}
    )
    return obj


@pytest.mark.django_db
def test_a_scan_reads_only_the_appended_bytes_and_a_late_answer_still_pairs(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    path = tmp_path / "live.jsonl"
    log = EnvelopeLog().initialize()
    for i in range(20):
        log.call("w", {"content": f"early {i} " * 50})
    request = {
        "jsonrpc": "2.0",
        "id": 900,
        "method": "tools/call",
        "params": {"name": "late", "arguments": {}},
    }
    log.frame("c2s", request)  # its answer comes with the next scan
    first = b"".join(log.lines)
    path.write_bytes(first)
    job = pipeline.ingest_watched_file(_watched(folder, path))
    w = WatchedFile.objects.get()
    assert w.last_scan_bytes == len(first) and w.offset == len(first)
    assert w.pairing_state  # the pending request is in it
    assert not ToolCall.objects.filter(job=job, tool="late").exists()

    more = EnvelopeLog()
    more.seq = 1000
    more.frame("s2c", {"jsonrpc": "2.0", "id": 900, "result": {"content": []}})
    more.next_id = 500
    more.call("w", {"content": "after"})
    appended = b"".join(more.lines)
    with open(path, "ab") as f:
        f.write(appended)
    job = pipeline.ingest_watched_file(_watched(folder, path))
    w.refresh_from_db()
    assert w.last_scan_bytes == len(appended)  # not a byte of the first part again
    assert w.line_no == len(log.lines) + len(more.lines)
    late = ToolCall.objects.filter(job=job, tool="late")
    assert late.count() == 1 and not late.get().unanswered
    assert late.get().agent is not None  # the session's initialize was read by the first scan
    assert ToolCall.objects.filter(job=job).count() == 22
    assert_reconciles(pipeline.ingest_watched_file(_watched(folder, path), final=True), w.line_no)


@pytest.mark.django_db
def test_a_rewritten_file_starts_over_from_its_first_byte(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path), pattern="*.jsonl")
    path = tmp_path / "live.jsonl"
    log = EnvelopeLog().initialize().call("w", {"content": "one"})
    path.write_bytes(b"".join(log.lines))
    pipeline.ingest_watched_file(_watched(folder, path))
    other = EnvelopeLog(session="s2").initialize().call("w", {"content": "two"}).call("w", {"content": "3"})
    data = b"".join(other.lines)
    with open(path, "r+b") as f:  # rewritten in place, longer: same inode, another head
        f.write(data)
    job = pipeline.ingest_watched_file(_watched(folder, path))
    w = WatchedFile.objects.get()
    assert w.last_scan_bytes == len(data) and w.line_no == len(other.lines)
    assert job.lines_read == len(other.lines) and job.calls_stored == 2


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["claude_code_session.jsonl", "codex_rollout.jsonl"])
def test_a_transcript_read_in_pieces_ends_as_read_at_once(team, team_factory, tmp_path, name):
    """Appended a few lines at a time, scanned after each: the same calls and counts as one read."""
    data = (LOGS / name).read_bytes()
    whole = pipeline.ingest_path(team_factory("At once"), LOGS / name)
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path), pattern="*.jsonl")
    path = tmp_path / name
    lines = data.splitlines(keepends=True)
    path.write_bytes(b"")
    read = 0
    for i in range(0, len(lines), 3):
        piece = b"".join(lines[i : i + 3])
        with open(path, "ab") as f:
            f.write(piece)
        pipeline.ingest_watched_file(_watched(folder, path))
        read += WatchedFile.objects.get().last_scan_bytes
    job = pipeline.ingest_watched_file(_watched(folder, path), final=True)
    assert read == len(data)  # every byte parsed once over all the scans
    fields = ("lines_read", "stored", "duplicate", "ignored", "quarantined", "calls_stored")
    assert [getattr(job, f) for f in fields] == [getattr(whole, f) for f in fields]
    assert sorted(ToolCall.objects.filter(job=job).values_list("output_tokens", "tool")) == sorted(
        ToolCall.objects.filter(job=whole).values_list("output_tokens", "tool")
    )
