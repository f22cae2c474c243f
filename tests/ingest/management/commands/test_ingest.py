"""`manage.py ingest` (ingest/management/commands/ingest.py)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from tests.ingest.capture.logs import (
    EnvelopeLog,
)


@pytest.mark.django_db
def test_management_command_prints_counts(team, tmp_path):
    path = EnvelopeLog().initialize().call("w", {"content": "x"}).write(tmp_path / "c.jsonl")
    out = StringIO()
    call_command("ingest", str(path), "--json", stdout=out)
    summary = json.loads(out.getvalue())
    assert summary["read"] == 5 and summary["stored"] == 2 and summary["ignored"] == 3
    assert summary["calls_stored"] == 1 and summary["reconciles"] and summary["status"] == "done"
    assert summary["verdict_counts"] == {"unverifiable": 1}
