"""Tailing one watched file (ingest.capture.pipeline.watched)."""

from __future__ import annotations

import os

import pytest

from ingest.capture import pipeline
from ingest.capture.models import (
    ToolCall,
    WatchedFile,
    WatchedFolder,
)
from tests.ingest.capture.logs import (
    EnvelopeLog,
    assert_reconciles,
)


@pytest.mark.django_db
def test_tailing_a_growing_file_stores_each_call_once_complete(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    log = EnvelopeLog().initialize()
    log.call("w", {"content": "first"})
    path = tmp_path / "live.jsonl"
    st = None

    def watched() -> WatchedFile:
        nonlocal st
        st = os.stat(path)
        obj, _ = WatchedFile.objects.get_or_create(
            folder=folder, device=st.st_dev, inode=st.st_ino, defaults={"path": str(path)}
        )
        return obj

    # Initialize, one call, then a request whose response is not written yet, then half a line.
    request = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "w", "arguments": {"content": "2"}},
    }
    log.frame("c2s", request)
    partial = b'{"session_id":"s1","direction":"s2c","raw":{"jsonrpc":"2.0","id":7,'
    path.write_bytes(b"".join(log.lines) + partial)
    job = pipeline.ingest_watched_file(watched())
    w = WatchedFile.objects.get()
    assert w.offset == sum(map(len, log.lines)) and w.line_no == 6
    assert job.status == "running" and job.source == "watch"
    assert list(ToolCall.objects.filter(job=job).values_list("tool", "unanswered")) == [("w", False)]
    assert job.lines_read == 5  # line 6 waits for its response

    # The rest of the response arrives, then more.
    with open(path, "ab") as f:
        f.write(b'"result":{"content":[]}}}\n')
    log.lines.append(partial + b'"result":{"content":[]}}}\n')
    more = EnvelopeLog()
    more.seq, more.next_id = 100, 50
    more.call("w", {"content": "third"})
    with open(path, "ab") as f:
        f.write(b"".join(more.lines))
    job = pipeline.ingest_watched_file(watched())
    assert ToolCall.objects.filter(job=job).count() == 3
    assert not ToolCall.objects.filter(job=job, unanswered=True).exists()
    assert job.lines_read == 9 and job.stored == 6 and job.reconciles
    # Nothing new: nothing happens; final ends the job.
    assert pipeline.ingest_watched_file(watched()).lines_read == 9
    done = pipeline.ingest_watched_file(watched(), final=True)
    assert_reconciles(done, 9)

    # Rotation: a new file at the same path is not this WatchedFile.
    rotated = WatchedFile.objects.get()
    path.rename(tmp_path / "live.jsonl.1")
    path.write_bytes(b"".join(log.lines[:2]))
    assert pipeline.ingest_watched_file(rotated) is None


@pytest.mark.django_db
def test_the_final_read_counts_a_last_line_without_newline(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    path = tmp_path / "rotated.jsonl"
    log = EnvelopeLog().initialize().call("w", {"content": "a"})
    body = b"".join(log.lines)
    path.write_bytes(body + b'{"not": "an envelope"')  # the writer died before the newline
    st = os.stat(path)
    w = WatchedFile.objects.create(folder=folder, path=str(path), device=st.st_dev, inode=st.st_ino)
    tailing = pipeline.ingest_watched_file(w)
    assert tailing.lines_read == len(log.lines)  # the incomplete line waits
    done = pipeline.ingest_watched_file(WatchedFile.objects.get(pk=w.pk), final=True)
    assert_reconciles(done, len(log.lines) + 1)
    assert done.quarantined == 1


@pytest.mark.django_db
def test_a_file_truncated_in_place_starts_a_new_job_without_duplicates(team, tmp_path):
    folder = WatchedFolder.objects.create(team=team, path=str(tmp_path))
    path = tmp_path / "t.jsonl"
    log = EnvelopeLog().initialize().call("w", {"content": "a"}).call("w", {"content": "b"})
    path.write_bytes(b"".join(log.lines))
    st = os.stat(path)
    w = WatchedFile.objects.create(folder=folder, path=str(path), device=st.st_dev, inode=st.st_ino)
    first = pipeline.ingest_watched_file(w)
    with open(path, "r+b") as f:  # copytruncate-style rotation keeps the inode
        f.truncate(0)
        f.write(b"".join(log.lines[:5]))
    second = pipeline.ingest_watched_file(w)
    assert second.pk != first.pk and second.calls_stored == 0 and second.duplicate == 2
