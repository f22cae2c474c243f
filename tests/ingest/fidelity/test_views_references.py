"""The reference documents page: what each document explains, registering one (inline or on the
worker for a big team), refusals, and removing one (its fingerprints go, the verdicts and rollups
that relied on it are recomputed)."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import Sum
from django.urls import reverse

from dashboard.teams.models import Membership
from ingest.capture.models import BulkArgument
from ingest.fidelity import views as fidelity_views
from ingest.fidelity.models import FidelityDaily, ReferenceDocument, ReferenceFingerprint
from tests.helpers import sha
from tests.ingest.fidelity.traffic import DOC_SHA, UNRELATED, pasted_argument

pytestmark = [pytest.mark.timeout(300)]


def test_a_big_team_re_judges_a_new_reference_on_the_worker(
    alice_client, fidelity_team, monkeypatch, django_capture_on_commit_callbacks, eager_celery
):
    monkeypatch.setattr(fidelity_views, "INLINE_REJUDGE_MAX_CONTENTS", 0)
    team = fidelity_team
    url = reverse("fidelity_references", args=[team.slug])
    upload = SimpleUploadedFile("notes.txt", UNRELATED.encode(), content_type="text/plain")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(url, {"action": "upload", "file": upload, "name": ""}, follow=True)
    assert "being recomputed by a worker" in response.content.decode()
    assert (
        pasted_argument(team, "unverifiable").verdict == "unverifiable"
    )  # not yet: the request did not wait
    assert len(callbacks) == 1
    # The commit hands the document to the task the view passed (run in-process here, as a worker would).
    callbacks[0]()
    assert pasted_argument(team, "unverifiable").verdict == "exact"
    assert ReferenceDocument.objects.get(team=team, name="notes.txt").rejudged == 1


def test_with_the_broker_down_a_new_reference_is_re_judged_in_the_request(
    alice_client, fidelity_team, monkeypatch, django_capture_on_commit_callbacks, settings, tmp_path
):
    from dashboard.system.models import OutageRecord
    from tests.dashboard.system.outage_helpers import celery_broker, closed_redis_url

    settings.VAR_DIR = tmp_path  # this test's outage files
    monkeypatch.setattr(fidelity_views, "INLINE_REJUDGE_MAX_CONTENTS", 0)
    team = fidelity_team
    url = reverse("fidelity_references", args=[team.slug])
    upload = SimpleUploadedFile("notes.txt", UNRELATED.encode(), content_type="text/plain")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = alice_client.post(url, {"action": "upload", "file": upload, "name": ""})
    assert response.status_code == 302 and len(callbacks) == 1
    # The commit finds no broker: the outage is recorded and the verdicts are recomputed here,
    # since nothing would send the task later.
    with celery_broker(closed_redis_url()):
        callbacks[0]()
    document = ReferenceDocument.objects.get(team=team, name="notes.txt")
    assert pasted_argument(team, "unverifiable").verdict == "exact" and document.rejudged == 1
    assert OutageRecord.objects.get(kind="broker").where == f"re-judging for reference document {document.pk}"


def test_reference_documents_page_lists_matches_and_registers(alice_client, fidelity_team, settings):
    team = fidelity_team
    url = reverse("fidelity_references", args=[team.slug])
    response = alice_client.get(url)
    row = response.context["documents"][0]
    # Every paste but the unrelated one expected the runbook (the reference call has no argument).
    assert row.document.name == "runbook.md" and row.pastes == 5 and row.exact_pastes == 1
    assert DOC_SHA in response.content.decode()

    # An upload: registered, with its figures, and the page says so.
    upload = SimpleUploadedFile("notes.txt", UNRELATED.encode(), content_type="text/plain")
    response = alice_client.post(url, {"action": "upload", "file": upload, "name": ""}, follow=True)
    assert "Registered notes.txt" in response.content.decode()
    created = ReferenceDocument.objects.get(team=team, name="notes.txt")
    assert created.sha256 == sha(UNRELATED) and created.lines == 40
    # ...and the unrelated paste is now judged against it.
    assert pasted_argument(team, "unverifiable").verdict == "exact"

    # A refused URL: loopback is not allowed, and the refusal is shown, nothing stored.
    settings.REFERENCE_ALLOWED_HOSTS = ["127.0.0.1"]
    response = alice_client.post(url, {"action": "url", "url": "http://127.0.0.1:9/x.md", "name": ""})
    assert response.status_code == 400
    assert "Refused:" in response.content.decode()
    assert ReferenceDocument.objects.filter(team=team).count() == 2
    # A host off the list is refused too.
    response = alice_client.post(url, {"action": "url", "url": "https://example.com/a.md"})
    assert response.status_code == 400 and "Refused:" in response.content.decode()


def rollup_arguments(team) -> dict[str, int]:
    rows = FidelityDaily.objects.filter(team=team).values("verdict").annotate(n=Sum("arguments"))
    return {r["verdict"]: r["n"] for r in rows if r["n"]}


def argument_verdicts(team) -> dict[str, int]:
    """The same counts straight from the judged arguments: what the rollups must agree with."""
    counts: dict[str, int] = {}
    for verdict in BulkArgument.objects.filter(team=team).values_list("verdict", flat=True):
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def test_removing_a_document_takes_its_fingerprints_and_rejudges_what_relied_on_it(
    alice_client, alice, fidelity_team, user_factory
):
    team = fidelity_team
    url = reverse("fidelity_references", args=[team.slug])
    before = rollup_arguments(team)
    assert before == argument_verdicts(team) and before["unverifiable"] == 1 and before["exact"] == 1
    upload = SimpleUploadedFile("notes.txt", UNRELATED.encode(), content_type="text/plain")
    alice_client.post(url, {"action": "upload", "file": upload, "name": ""})
    notes = ReferenceDocument.objects.get(team=team, name="notes.txt")
    assert ReferenceFingerprint.objects.filter(document=notes).count() == 6
    matched = pasted_argument(team, "unverifiable")
    assert matched.verdict == "exact" and matched.expected_sha256 == sha(UNRELATED)
    moved = {verdict: n for verdict, n in before.items() if verdict != "unverifiable"}
    moved["exact"] += 1
    assert rollup_arguments(team) == moved == argument_verdicts(team)

    # A plain member cannot remove it.
    bob = user_factory("bob")
    Membership.objects.create(team=team, user=bob, role=Membership.Role.MEMBER)
    alice_client.force_login(bob)
    delete = reverse("fidelity_reference_delete", args=[team.slug, notes.code])
    assert alice_client.post(delete).status_code == 404
    assert ReferenceDocument.objects.filter(pk=notes.pk).exists()

    # The admin removes it: the row and its fingerprints go, the paste it explained is unverifiable
    # again, the rollups move back, and the page says how many verdicts changed.
    alice_client.force_login(alice)
    response = alice_client.post(delete, follow=True)
    assert response.redirect_chain == [(url, 302)]
    assert "Removed notes.txt; 1 verdict(s) recomputed." in response.content.decode()
    assert not ReferenceDocument.objects.filter(pk=notes.pk).exists()
    assert not ReferenceFingerprint.objects.filter(document_id=notes.pk).exists()
    again = pasted_argument(team, "unverifiable")
    assert (again.verdict, again.expected_sha256, again.evidence["document"]) == ("unverifiable", "", None)
    assert rollup_arguments(team) == before == argument_verdicts(team)
    # The runbook, which nothing removed, still explains its five pastes.
    assert response.context["documents"][0].document.sha256 == DOC_SHA
    assert response.context["documents"][0].pastes == 5
