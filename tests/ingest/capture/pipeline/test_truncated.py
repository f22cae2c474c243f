"""mcpsnoop's cut copies of large frames through a real ingest: the request still forms its call,
the argument the cut went through is recorded with the bytes seen and judged capture_truncated,
the cut response is part of the call (no orphan) and leaves its result unknown."""

from __future__ import annotations

import json

import pytest

from ingest.capture import pipeline
from ingest.capture.models import BulkArgument, ToolCall
from tests.helpers import assert_job_reconciles, sha
from tests.mcptax.formats.helpers import seen_after_cut

BIG = "# Runbook\n\n" + "Restart the worker, then check the queue depth.\n" * 400


def _frame(seq: int, direction: str, **fields: object) -> bytes:
    record = {"session_id": "snoop-7", "server_label": "files", "seq": seq, "direction": direction}
    record["ts"] = f"2026-02-03T09:00:{seq:02d}Z"
    return json.dumps({**record, "transport": "stdio", **fields}).encode() + b"\n"


@pytest.mark.django_db
@pytest.mark.parametrize("key", ["content", "patch"])  # a content key, and a plain key cut short
def test_a_cut_request_is_stored_with_its_cut_argument_judged_capture_truncated(team, tmp_path, key):
    arguments = {"path": "runbook.md", key: BIG, "mode": "overwrite"}
    request = {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "tools/call",
        "params": {"name": "write_file", "arguments": arguments},
    }
    answer = {"jsonrpc": "2.0", "id": 41, "result": {"content": [{"type": "text", "text": "wrote " + BIG}]}}
    request_cut, answer_cut = json.dumps(request)[:700], json.dumps(answer)[:400]
    path = tmp_path / "snoop.jsonl"
    path.write_bytes(
        _frame(1, "s2c", text="Starting files server on stdio")  # non-JSON output
        + _frame(2, "c2s", text=request_cut, truncated=True)
        + _frame(3, "s2c", text=answer_cut, truncated=True)
    )
    job = pipeline.ingest_path(team, path)

    assert_job_reconciles(job, 3)
    assert (job.stored, job.ignored, job.quarantined, job.calls_stored) == (2, 1, 0, 1)
    call = ToolCall.objects.get(team=team)
    assert (call.tool, call.jsonrpc_id, call.capture_truncated) == ("write_file", "41", True)
    assert call.is_error is None and not call.unanswered  # the cut answer: result unknown
    seen = seen_after_cut(request_cut, f'"{key}": "')
    assert 0 < len(seen.encode()) < 1024 and BIG.startswith(seen)
    (argument,) = BulkArgument.objects.filter(call=call)
    assert (argument.pointer, argument.bytes, argument.sha256) == (f"/{key}", len(seen.encode()), sha(seen))
    assert argument.capture_truncated and argument.verdict == "capture_truncated"
    assert job.verdict_counts == {"capture_truncated": 1}
