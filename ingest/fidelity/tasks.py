"""Celery tasks of fidelity (routed to the ingest queue by their ``ingest.tasks.*`` names)."""

from __future__ import annotations

from celery import shared_task

from ingest.fidelity.models import ReferenceDocument
from ingest.fidelity.verdicts import rejudge_for_document


# The name predates this module; messages in flight and the ingest route use it.
@shared_task(name="ingest.tasks.rejudge_document", ignore_result=True)
def rejudge_document_task(document_id: int) -> int:
    """Re-judge what a newly registered document explains (a removed document: nothing to do)."""
    document = ReferenceDocument.objects.filter(pk=document_id).select_related("team").first()
    return rejudge_for_document(document) if document is not None else 0
