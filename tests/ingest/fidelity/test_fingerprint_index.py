"""The reference-document lookup runs on the product's own table, index and query: documents are
registered the way users register them, a damaged paste is looked up with ``find_documents``,
and the plan of the exact SQL it ran must use the ``fingerprint_lookup`` index."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from ingest.fidelity.models import ReferenceFingerprint
from ingest.fidelity.references import register_upload
from ingest.fidelity.verdicts import find_documents
from tests.helpers import sha

pytestmark = pytest.mark.django_db

DOC = "".join(f"## Section {i}\nThis paragraph {i} explains the rule number {i * 31}.\n\n" for i in range(60))
UNRELATED = "".join(f"* bullet {i}: nothing to do with the other text {i * 17}\n" for i in range(60))
TABLE = ReferenceFingerprint._meta.db_table


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        # Statistics first, as a production database has them: the planner then knows that
        # team_id alone selects every row here.
        cursor.execute(f"ANALYZE {TABLE}")
        if connection.vendor == "postgresql":
            # Test tables are tiny, which makes a sequential scan cheapest; forbidding it shows
            # which index serves this query (without a usable one PostgreSQL still scans).
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute(f"EXPLAIN {sql}")
            return "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def test_damaged_paste_is_found_through_the_fingerprint_index(team) -> None:
    doc, _ = register_upload(team, DOC.encode(), name="doc", rejudge=False)
    register_upload(team, UNRELATED.encode(), name="unrelated", rejudge=False)
    for i in range(200):
        register_upload(team, (f"{i}\n" * (i + 50)).encode(), name=f"filler{i}", rejudge=False)
    paste = DOC[:1500].replace("\n", "\r\n")

    with CaptureQueriesContext(connection) as queries:
        found = find_documents(team, {1: paste}, {1: sha(paste)})

    assert set(found) == {1} and found[1].document.pk == doc.pk
    assert found[1].kinds  # at least one head window survived the damage
    lookups = [q["sql"] for q in queries.captured_queries if f'FROM "{TABLE}"' in q["sql"]]
    # A probe whether the team has any document (a team without skips fingerprinting), then
    # the one lookup of every key; neither reads the table through.
    assert len(lookups) == 2 and "LIMIT 1" in lookups[0], lookups
    plan = plan_of(lookups[1])
    assert "fingerprint_lookup" in plan, plan
    for query_plan in (plan_of(lookups[0]), plan):
        if connection.vendor == "sqlite":
            assert f"SCAN {TABLE}" not in query_plan, query_plan
        else:
            assert f"Seq Scan on {TABLE}" not in query_plan, query_plan
