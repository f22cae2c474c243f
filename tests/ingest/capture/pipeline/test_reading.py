"""Reading the input (ingest.capture.pipeline.reading): every format, gzip, unknown formats, bytes
that are not UTF-8, and fuzzed logs that must never crash and always reconcile."""

from __future__ import annotations

import gzip
import json

import pytest
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from dashboard.teams.models import Team
from ingest.capture import pipeline
from ingest.capture.models import (
    LineRecord,
    ToolCall,
)
from tests.ingest.capture.logs import (
    LOGS,
    EnvelopeLog,
    assert_reconciles,
    count_lines,
    line_count,
)

pytestmark = pytest.mark.timeout(240)


@pytest.mark.django_db
def test_sample_logs_of_every_format_ingest_and_reconcile(team):
    expected = {
        "envelope.jsonl": "envelope",
        "envelope_redacted.jsonl": "envelope",
        "mcp_session.har": "har",
        "claude_code_session.jsonl": "claude-code",
        "codex_rollout.jsonl": "codex",
    }
    for name, fmt in expected.items():
        job = pipeline.ingest_path(team, LOGS / name)
        lines = len(json.loads((LOGS / name).read_bytes())["log"]["entries"]) if fmt == "har" else None
        assert_reconciles(job, lines if lines is not None else line_count(LOGS / name))
        assert job.format == fmt and job.calls_stored > 0, name
    redacted = ToolCall.objects.get(source_format="envelope", redacted=True)
    digest = redacted.bulk_arguments.get()
    assert digest.kind == "digest" and len(digest.sha256) == 64 and digest.content is None


@pytest.mark.django_db
def test_invalid_utf8_quarantine_keeps_the_exact_bytes(team, tmp_path):
    path = tmp_path / "c.jsonl"
    raw = b'{"session_id":"s","direction":"c2s","raw":{"x":"\xff\xfe"}}'
    path.write_bytes(raw + b"\n" + b"\x00\x00\n")
    job = pipeline.ingest_path(team, path, format="envelope")
    assert_reconciles(job, 2)
    first, second = LineRecord.objects.filter(job=job).order_by("line_no")
    assert first.reason == "invalid_utf8" and first.exact_raw() == raw and "\\xff" in first.raw
    assert second.exact_raw() == b"\x00\x00" and "\x00" not in second.raw


@pytest.mark.django_db
def test_gzip_input_and_unknown_formats(team, tmp_path):
    source = EnvelopeLog().initialize().call("w", {"content": "abc"})
    gz = tmp_path / "c.jsonl.gz"
    gz.write_bytes(gzip.compress(b"".join(source.lines)))
    job = pipeline.ingest_path(team, gz)
    assert_reconciles(job, len(source.lines))
    assert job.calls_stored == 1 and job.bytes_done == gz.stat().st_size

    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n\nworld\n")
    unknown = pipeline.ingest_path(team, junk)
    # Not a log at all: the job fails with the reason, and keeps none of the file's lines.
    assert unknown.status == "failed" and unknown.format == "unknown"
    assert (unknown.lines_read, unknown.quarantined, unknown.ignored) == (0, 0, 0)
    assert unknown.error.startswith("cannot tell the log format")
    assert not LineRecord.objects.filter(job=unknown).exists()

    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    job = pipeline.ingest_path(team, empty)
    assert job.status == "done" and job.lines_read == 0 and not job.error


# Only the deadline is lifted (one example ingests a file twice against the database); every
# health check stays on: the test takes no function-scoped fixture, each example makes its team.
FUZZ = settings(max_examples=25, deadline=None)

_SAMPLES = {
    "envelope": (LOGS / "envelope.jsonl").read_bytes().splitlines(keepends=True),
    "claude-code": (LOGS / "claude_code_session.jsonl").read_bytes().splitlines(keepends=True),
    "codex": (LOGS / "codex_rollout.jsonl").read_bytes().splitlines(keepends=True),
}

_HOSTILE = [
    b"[" * 3000 + b"\n",
    b'{"n": 1e999}\n',
    b'{"x": "\xff"}\n',
    b"\x00\x00\n",
    b'{"session_id":"s","direction":"c2s","raw":{"jsonrpc":"2.0","id":1,"method":"tools/call",'
    b'"params":{"name":"t\\u0000","arguments":{"content":"\\u0000\\ud800"}}}}\n',
    b'{"session_id":"s","direction":"s2c","raw":{"jsonrpc":"2.0","id":1,"error":{"\\u0000":"\\u0000"}}}\n',
    b"\n",
]


@st.composite
def mangled_logs(draw) -> tuple[str, bytes]:
    fmt = draw(st.sampled_from(sorted(_SAMPLES)))
    lines = list(_SAMPLES[fmt])
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["drop", "dup", "cut", "hostile", "swap"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop" and len(lines) > 1:
            lines.pop(i)
        elif op == "dup":
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif op == "cut":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))] + b"\n"
        elif op == "hostile":
            lines.insert(i, draw(st.sampled_from(_HOSTILE)))
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
    if draw(st.booleans()):
        lines.append(draw(st.binary(max_size=200)))
    return fmt, b"".join(lines)


@pytest.mark.django_db
@FUZZ
@given(case=mangled_logs(), batch=st.integers(1, 4))
def test_fuzzed_logs_never_crash_and_always_reconcile_twice(tmp_path_factory, case, batch):
    fmt, data = case
    path = tmp_path_factory.mktemp("fuzz") / "f.jsonl"
    path.write_bytes(data)
    lines = count_lines(data)
    # The database is not rolled back between examples: each gets its own team.
    team = Team.objects.create(name=f"fuzz {Team.objects.count()}")
    with override_settings(INGEST_BATCH_CALLS=batch, INGEST_BATCH_LINES=batch * 3):
        first = pipeline.ingest_path(team, path, format=fmt)
        second = pipeline.ingest_path(team, path, format=fmt)
    for job in (first, second):
        assert job.status == "done", job.error
        assert job.lines_read == lines and job.reconciles, (job.lines_read, lines)
    assert second.calls_stored == 0 and second.stored == 0
    # A repeated frame is a duplicate already in the first run; in the second, so is every stored line.
    assert second.duplicate == first.stored + first.duplicate
