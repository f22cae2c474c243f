"""Fixtures of the fidelity tests: the scripted agent's traffic, captured once per session by the
real proxy, and a team with it ingested against the registered reference document."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard.teams.models import Team
from ingest.capture import pipeline
from ingest.fidelity import references
from tests.ingest.fidelity.traffic import DOC, capture_log


@pytest.fixture(scope="session")
def captured_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The envelope log of the scripted agent, captured once per session by the real proxy."""
    return capture_log(tmp_path_factory.mktemp("fidelity-capture"))


@pytest.fixture
def fidelity_team(team: Team, captured_log: Path) -> Team:
    """``team`` with the reference document registered and the captured log ingested."""
    references.register_upload(team, DOC.encode(), name="runbook.md")
    job = pipeline.ingest_path(team, captured_log)
    assert job.status == "done", job.error
    return team
