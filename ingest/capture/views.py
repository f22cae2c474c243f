"""Capture pages: upload a log, follow its job, inspect the quarantine, manage watched folders.

Every lookup is scoped to a team of the user (another team's job, line or folder is a 404).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.system import broker
from dashboard.teams.access import Action, allowed, get_team_for_user, require
from dashboard.teams.models import Team
from ingest.capture import pipeline, retention, selectors, watch
from ingest.capture.forms import UploadForm, WatchedFolderForm, size_limit_message
from ingest.capture.models import IngestJob, LineRecord, WatchedFolder
from ingest.capture.storage import open_stored
from ingest.capture.uploads import SPOOL_RETRY_AFTER, IngestUploadHandler, SpooledUpload, SpoolFull

logger = logging.getLogger(__name__)
JOBS_PER_PAGE = 25
LINES_PER_PAGE = 50
CALLS_PER_PAGE = 25
# The line page shows this much of a line; the download gives every byte.
RAW_PAGE_CHARS = 200_000


def _get_job_for_user(request: HtmxHttpRequest, team_slug: str, code: uuid.UUID) -> IngestJob:
    team = get_team_for_user(request, team_slug)
    return get_object_or_404(IngestJob.objects.select_related("created_by", "team"), team=team, code=code)


def _get_folder_for_admin(request: HtmxHttpRequest, team_slug: str, folder_id: int) -> WatchedFolder:
    team = get_team_for_user(request, team_slug, Action.MANAGE_WATCH)
    return get_object_or_404(WatchedFolder.objects.select_related("team"), team=team, pk=folder_id)


def _get_line_for_user(request: HtmxHttpRequest, team_slug: str, line_id: int) -> LineRecord:
    team = get_team_for_user(request, team_slug)
    return get_object_or_404(LineRecord.objects.select_related("job", "team"), team=team, pk=line_id)


# --- the ingest page -----------------------------------------------------------------------------


def _home_context(request: HtmxHttpRequest, team: Team, form: UploadForm) -> dict[str, Any]:
    sort = request.GET.get("sort", selectors.DEFAULT_JOB_SORT)
    sort = sort if sort in selectors.JOB_SORTS else selectors.DEFAULT_JOB_SORT
    page = Paginator(selectors.jobs(team, sort), JOBS_PER_PAGE).get_page(request.GET.get("page"))
    return {
        "team": team,
        "jobs_page": page,
        "sort": sort,
        "polling": any(selectors.is_in_progress(job) for job in page),
        "query": urlencode({"sort": sort, "page": page.number}),
        "form": form,
        "max_upload": settings.INGEST_MAX_UPLOAD_BYTES,
        "quarantined": selectors.quarantined_lines(team).count(),
        "folders": selectors.folders_with_file_counts(team),
    }


@login_required
def ingest_home(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = _home_context(request, team, UploadForm())
    return render_page(
        request, "capture/home.html", ctx, partial="jobs-region", stop_polling=not ctx["polling"]
    )


@csrf_exempt  # the upload handlers must be in place before the CSRF check reads the body
@login_required
def upload(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.UPLOAD_LOG)
    handler = IngestUploadHandler(request, team=team)
    request.upload_handlers = [handler]
    try:
        return _upload(request, team, handler)
    finally:
        handler.discard_unless_kept()


@csrf_protect
@require_POST
def _upload(request: HtmxHttpRequest, team: Team, handler: IngestUploadHandler) -> HttpResponse:
    data, files = request.POST, request.FILES  # reading them runs the upload handler
    if handler.spool_full is not None:
        return _spool_full_page(request, team, handler.spool_full)
    form = UploadForm(data, files)
    valid = form.is_valid()
    if handler.too_large:
        valid = False
        form.errors["file"] = form.error_class([size_limit_message(handler.max_bytes)])
    if not valid:
        spooled = request.FILES.get("file")
        if isinstance(spooled, SpooledUpload):
            spooled.discard()
        ctx = _home_context(request, team, form)
        return render_page(request, "capture/home.html", ctx, status=413 if handler.too_large else 400)
    spooled = form.cleaned_data["file"]
    try:
        stored = spooled.store()  # into the shared ingest storage, where any worker finds it
    except SpoolFull as exc:
        return _spool_full_page(request, team, exc)
    except OSError:
        logger.exception("upload: the file could not be saved into the ingest storage")
        form.add_error(
            "file",
            "The file could not be kept: the ingest storage is unavailable. Nothing was stored; try again later.",
        )
        ctx = _home_context(request, team, form)
        return render_page(request, "capture/home.html", ctx, status=503)
    with transaction.atomic():
        job = pipeline.create_job(
            team,
            source=IngestJob.Source.UPLOAD,
            filename=spooled.name,
            storage_name=stored,
            size=spooled.size,
            format=form.cleaned_data["format"],
            user=request.user,
        )
        sent = pipeline.enqueue_job(job)
    handler.kept = True  # committed: the job owns the file now
    if sent.ok is False:  # saved all the same: never a 500 for an upload that is kept
        messages.warning(request, f"{spooled.name} uploaded. {pipeline.queued_for_sweep_message()}")
    else:
        messages.success(request, f"{spooled.name} uploaded; its status below follows the ingest live.")
    return redirect("ingest_job", team_slug=team.slug, code=job.code)


def _spool_full_page(request: HtmxHttpRequest, team: Team, exc: SpoolFull) -> HttpResponse:
    """The upload page again with the reason (507 for a full disk, else 503) and Retry-After;
    the handler already removed what was written."""
    form = UploadForm()
    form.cleaned_data = {}  # an unbound form that still carries the reason
    form.add_error(None, exc.reason)
    response = render_page(
        request, "capture/home.html", _home_context(request, team, form), status=exc.status
    )
    response["Retry-After"] = str(SPOOL_RETRY_AFTER)
    return response


# --- one job -------------------------------------------------------------------------------------


def _sorted_reasons(counts: dict[str, int] | None) -> list[tuple[str, int]]:
    return sorted((counts or {}).items(), key=lambda item: (-item[1], item[0]))


def _progress_context(job: IngestJob) -> dict[str, Any]:
    return {
        # A file read in ranges: its counters are the ranges' sums while they run.
        "ranges": pipeline.range_progress(job),
        "team": job.team,
        "job": job,
        "polling": selectors.is_in_progress(job),
        "ignored_reasons": _sorted_reasons(job.ignored_reasons),
        "quarantined_reasons": _sorted_reasons(job.quarantined_reasons),
        "verdicts": _sorted_reasons(job.verdict_counts),
        # The first attempt and its retries.
        "max_attempts": settings.INGEST_RETRY_MAX + 1,
    }


@login_required
def job_detail(request: HtmxHttpRequest, team_slug: str, code: uuid.UUID) -> HttpResponse:
    job = _get_job_for_user(request, team_slug, code)
    calls_page = Paginator(selectors.job_calls(job), CALLS_PER_PAGE).get_page(request.GET.get("calls_page"))
    ctx = {
        **_progress_context(job),
        "calls_page": calls_page,
        "quarantined_lines": selectors.job_quarantined_lines(job),
        "watched": selectors.watched_file_of(job),
    }
    return render_page(request, "capture/job.html", ctx, partial="results-region")


@login_required
def job_progress(request: HtmxHttpRequest, team_slug: str, code: uuid.UUID) -> HttpResponse:
    """The job's progress and counts; polled by htmx until the job is no longer in progress."""
    job = _get_job_for_user(request, team_slug, code)
    ctx = _progress_context(job)
    finished = not ctx["polling"]
    response = render_page(request, "capture/job.html#progress-region", ctx, stop_polling=finished)
    if finished:
        # The calls and quarantined lines below were rendered before the job ran: they reload on this.
        response = trigger_client_event(response, "ingestJobFinished", {"job": str(job.code)})
    return response


# --- quarantine ----------------------------------------------------------------------------------


def _selected_job(team: Team, job_code: str) -> IngestJob | None:
    if not job_code:
        return None
    try:
        code = uuid.UUID(job_code)
    except ValueError:
        raise Http404("No such ingest job") from None
    return get_object_or_404(IngestJob, team=team, code=code)


@login_required
def quarantine(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    reason = request.GET.get("reason", "")
    job_code = request.GET.get("job", "")
    selected_job = _selected_job(team, job_code)
    lines = selectors.quarantine_listing(team, reason=reason, job=selected_job)
    filters = {k: v for k, v in (("reason", reason), ("job", job_code)) if v}
    ctx = {
        "team": team,
        "lines_page": Paginator(lines, LINES_PER_PAGE).get_page(request.GET.get("page")),
        "reasons": selectors.quarantine_reasons(team),
        "reason": reason,
        "selected_job": selected_job,
        "jobs_with_lines": selectors.jobs_with_quarantine(team, selected_job),
        "filter_query": urlencode(filters),
        "can_delete": allowed(request, team, Action.DELETE_QUARANTINE),
        "retention_days": settings.QUARANTINE_RETENTION_DAYS,
    }
    return render_page(request, "capture/quarantine.html", ctx, partial="lines-region")


@login_required
@require_POST
def quarantine_delete(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    """Delete the quarantined lines the page's filters select: one job's, one reason's, or all."""
    team = get_team_for_user(request, team_slug, Action.DELETE_QUARANTINE)
    reason = request.POST.get("reason", "")
    job = _selected_job(team, request.POST.get("job", ""))
    deleted = retention.delete_quarantined(selectors.quarantine_listing(team, reason=reason, job=job))
    left = selectors.quarantine_listing(team, reason=reason, job=job).count()
    what = f" of {job.filename or 'the job'}" if job is not None else ""
    messages.success(request, f"Deleted {deleted:,} quarantined line(s){what}.")
    if left:
        messages.info(
            request, f"{left:,} line(s) of jobs still running were kept; delete them once they finish."
        )
    return redirect("ingest_quarantine", team_slug=team.slug)


@login_required
def line_detail(request: HtmxHttpRequest, team_slug: str, line_id: int) -> HttpResponse:
    line = _get_line_for_user(request, team_slug, line_id)
    text = line.raw
    ctx = {
        "team": line.team,
        "line": line,
        "text": text[:RAW_PAGE_CHARS],
        "cut": len(text) > RAW_PAGE_CHARS,
        "escaped": line.raw_data is not None,
    }
    return render_page(request, "capture/line.html", ctx)


@login_required
def line_raw(request: HtmxHttpRequest, team_slug: str, line_id: int) -> HttpResponse | FileResponse:
    """The line's exact bytes, as a download (never rendered as HTML)."""
    line = _get_line_for_user(request, team_slug, line_id)
    filename = f"job-{line.job.code}-line-{line.line_no}.txt"
    response: HttpResponse | FileResponse
    if line.raw_file:
        # A long line is streamed from its file, never read into memory.
        kept, _ = open_stored(line.raw_file)
        response = FileResponse(kept, as_attachment=True, filename=filename)
        response["Content-Type"] = "application/octet-stream"
    else:
        response = HttpResponse(line.exact_raw(), content_type="application/octet-stream")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- watched folders -----------------------------------------------------------------------------


@login_required
def watched_folders(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    enabled = watch.watch_enabled()
    form = None
    if allowed(request, team, Action.MANAGE_WATCH):
        # Off (no INGEST_WATCH_DIRS): the form is not shown, and a POST is refused by its clean_path.
        form = WatchedFolderForm(request.POST or None, team=team)
        if request.method == "POST" and form.is_valid():
            folder = form.save()
            messages.success(
                request, f"Watching {folder.path} for {folder.pattern}; the first scan runs shortly."
            )
            return redirect("ingest_watch", team_slug=team.slug)
    elif request.method == "POST":
        require(request, team, Action.MANAGE_WATCH)
    ctx = {
        "team": team,
        "form": form,
        "folders": selectors.folders_with_files(team),
        "watch_enabled": enabled,
        "allowed_roots": watch.allowed_roots(),
        "off_message": watch.OFF_MESSAGE,
    }
    status = 400 if form is not None and form.errors else 200
    return render_page(request, "capture/watch.html", ctx, partial="folders-region", status=status)


@login_required
@require_POST
def watched_folder_toggle(request: HtmxHttpRequest, team_slug: str, folder_id: int) -> HttpResponse:
    folder = _get_folder_for_admin(request, team_slug, folder_id)
    folder.enabled = not folder.enabled
    folder.save(update_fields=["enabled"])
    messages.success(request, f"{folder.path}: {'enabled' if folder.enabled else 'paused'}.")
    return redirect("ingest_watch", team_slug=folder.team.slug)


@login_required
@require_POST
def watched_folder_scan(request: HtmxHttpRequest, team_slug: str, folder_id: int) -> HttpResponse:
    folder = _get_folder_for_admin(request, team_slug, folder_id)
    sent = broker.send_task(watch.SCAN_TASK, folder.pk, where=f"scan of watched folder {folder.pk}")
    if sent.ok is not False:
        messages.success(request, f"Scan of {folder.path} requested.")
    else:
        messages.error(
            request,
            "The task queue (broker) is unavailable, so the scan was not requested; the folder is "
            "scanned every 10 s once it answers again.",
        )
    return redirect("ingest_watch", team_slug=folder.team.slug)


@login_required
@require_POST
def watched_folder_delete(request: HtmxHttpRequest, team_slug: str, folder_id: int) -> HttpResponse:
    folder = _get_folder_for_admin(request, team_slug, folder_id)
    path, slug = folder.path, folder.team.slug
    folder.delete()
    messages.success(request, f"Stopped watching {path}. Jobs and calls already ingested are kept.")
    return redirect("ingest_watch", team_slug=slug)
