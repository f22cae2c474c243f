"""Ingest pages: upload a log, follow its job, inspect the quarantine, manage watched folders.

Every lookup is scoped to a team of the user (another team's job, line or folder is a 404).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Count, Prefetch, Q
from django.db.models.functions import Substr
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from dashboard.teams.access import get_team_for_user
from dashboard.teams.models import Team
from ingest.capture import pipeline
from ingest.capture.forms import IngestUploadHandler, UploadForm, WatchedFolderForm, size_limit_message
from ingest.capture.models import IngestJob, LineRecord, ToolCall, WatchedFile, WatchedFolder

JOBS_PER_PAGE = 25
LINES_PER_PAGE = 50
CALLS_PER_PAGE = 25
# A quarantined line can be megabytes: pages show this much, the download gives every byte.
RAW_PREVIEW_CHARS = 200
RAW_PAGE_CHARS = 200_000

JOB_SORTS = {
    "created": "created",
    "-created": "-created",
    "file": "filename",
    "-file": "-filename",
    "lines": "lines_read",
    "-lines": "-lines_read",
    "quarantined": "quarantined",
    "-quarantined": "-quarantined",
    "status": "status",
    "-status": "-status",
}
ACTIVE = (IngestJob.Status.QUEUED, IngestJob.Status.RUNNING)


def _get_job(team: Team, code) -> IngestJob:
    job = IngestJob.objects.filter(team=team, code=code).select_related("created_by").first()
    if job is None:
        raise Http404("No such ingest job")
    return job


def _get_folder(team: Team, folder_id: int) -> WatchedFolder:
    folder = WatchedFolder.objects.filter(team=team, pk=folder_id).first()
    if folder is None:
        raise Http404("No such watched folder")
    return folder


def is_in_progress(job: IngestJob) -> bool:
    """Whether a page should keep polling this job (a watched file's job stays open while tailed)."""
    return job.status in ACTIVE and job.source != IngestJob.Source.WATCH


def _render_region(request: HttpRequest, template: str, ctx: dict, *, stop_polling: bool) -> HttpResponse:
    if stop_polling:
        return HttpResponseStopPolling(render_to_string(template, ctx, request=request))
    return render(request, template, ctx)


# --- the ingest page -----------------------------------------------------------------------------


def _jobs_context(request: HttpRequest, team: Team) -> dict:
    sort = request.GET.get("sort", "-created")
    sort = sort if sort in JOB_SORTS else "-created"
    jobs = IngestJob.objects.filter(team=team).select_related("created_by").order_by(JOB_SORTS[sort], "-pk")
    page = Paginator(jobs, JOBS_PER_PAGE).get_page(request.GET.get("page"))
    polling = any(is_in_progress(job) for job in page)
    return {
        "team": team,
        "jobs_page": page,
        "sort": sort,
        "polling": polling,
        "query": urlencode({"sort": sort, "page": page.number}),
    }


@login_required
def ingest_home(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    ctx = _jobs_context(request, team)
    if request.htmx:
        return _render_region(request, "capture/home.html#jobs-region", ctx, stop_polling=not ctx["polling"])
    ctx.update(
        form=UploadForm(),
        max_upload=settings.INGEST_MAX_UPLOAD_BYTES,
        quarantined=LineRecord.objects.filter(team=team, status=LineRecord.Status.QUARANTINED).count(),
        folders=WatchedFolder.objects.filter(team=team).annotate(file_count=Count("files")),
    )
    return render(request, "capture/home.html", ctx)


@csrf_exempt  # the upload handlers must be in place before the CSRF check reads the body
@login_required
def upload(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    handler = IngestUploadHandler(request, directory=pipeline.upload_dir(team))
    request.upload_handlers = [handler]
    return _upload(request, team, handler)


@csrf_protect
@require_POST
def _upload(request: HttpRequest, team: Team, handler: IngestUploadHandler) -> HttpResponse:
    form = UploadForm(request.POST, request.FILES)
    valid = form.is_valid()
    if handler.too_large:
        valid = False
        form.errors["file"] = form.error_class([size_limit_message(handler.max_bytes)])
    if not valid:
        spooled = request.FILES.get("file")
        if spooled is not None and hasattr(spooled, "discard"):
            spooled.discard()
        ctx = _jobs_context(request, team)
        ctx.update(
            form=form,
            max_upload=settings.INGEST_MAX_UPLOAD_BYTES,
            quarantined=LineRecord.objects.filter(team=team, status=LineRecord.Status.QUARANTINED).count(),
            folders=WatchedFolder.objects.filter(team=team).annotate(file_count=Count("files")),
        )
        return render(request, "capture/home.html", ctx, status=413 if handler.too_large else 400)
    spooled = form.cleaned_data["file"]
    spooled.close()
    with transaction.atomic():
        job = pipeline.create_job(
            team,
            source=IngestJob.Source.UPLOAD,
            filename=spooled.name,
            path=spooled.temporary_file_path(),
            format=form.cleaned_data["format"],
            user=request.user,
        )
        pipeline.enqueue_job(job)
    messages.success(request, f"{spooled.name} uploaded; it is being ingested.")
    return redirect("ingest_job", team_slug=team.slug, code=job.code)


# --- one job -------------------------------------------------------------------------------------


def _sorted_reasons(counts: dict | None) -> list[tuple[str, int]]:
    return sorted((counts or {}).items(), key=lambda item: (-item[1], item[0]))


def _progress_context(team: Team, job: IngestJob) -> dict:
    return {
        "team": team,
        "job": job,
        "polling": is_in_progress(job),
        "ignored_reasons": _sorted_reasons(job.ignored_reasons),
        "quarantined_reasons": _sorted_reasons(job.quarantined_reasons),
        "verdicts": _sorted_reasons(job.verdict_counts),
    }


@login_required
def job_detail(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    job = _get_job(team, code)
    calls = (
        ToolCall.objects.filter(team=team, job=job)
        .select_related("agent")
        .order_by("request_ts", "pk")
        .only(
            "pk",
            "tool",
            "server_label",
            "request_ts",
            "argument_bytes",
            "bulk_count",
            "is_error",
            "unanswered",
            "jsonrpc_error",
            "agent__family",
            "agent__version",
            "agent__name",
        )
    )
    calls_page = Paginator(calls, CALLS_PER_PAGE).get_page(request.GET.get("calls_page"))
    lines = (
        LineRecord.objects.filter(job=job, status=LineRecord.Status.QUARANTINED)
        .defer("raw", "raw_data")
        .annotate(preview=Substr("raw", 1, RAW_PREVIEW_CHARS))
        .order_by("line_no")[:20]
    )
    ctx = {"team": team, "job": job, "calls_page": calls_page, "quarantined_lines": lines}
    if request.htmx and request.htmx.target == "results-region":
        return render(request, "capture/job.html#results-region", ctx)
    ctx.update(_progress_context(team, job))
    ctx["watched"] = WatchedFile.objects.filter(job=job, folder__team=team).select_related("folder").first()
    return render(request, "capture/job.html", ctx)


@login_required
def job_progress(request: HttpRequest, team_slug: str, code) -> HttpResponse:
    """The job's progress and counts; polled by htmx until the job is no longer in progress."""
    team = get_team_for_user(request, team_slug)
    job = _get_job(team, code)
    ctx = _progress_context(team, job)
    if ctx["polling"]:
        return render(request, "capture/job.html#progress-region", ctx)
    response = HttpResponseStopPolling(
        render_to_string("capture/job.html#progress-region", ctx, request=request)
    )
    # The calls and quarantined lines below were rendered before the job ran: they reload on this.
    return trigger_client_event(response, "ingestJobFinished", {"job": str(job.code)})


# --- quarantine ----------------------------------------------------------------------------------


@login_required
def quarantine(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    base = LineRecord.objects.filter(team=team, status=LineRecord.Status.QUARANTINED)
    reasons = list(base.values("reason").annotate(n=Count("pk")).order_by("-n", "reason"))
    reason = request.GET.get("reason", "")
    job_code = request.GET.get("job", "")
    lines = base
    if reason:
        lines = lines.filter(reason=reason)
    selected_job = None
    if job_code:
        selected_job = (
            IngestJob.objects.filter(team=team, code=job_code).first() if _is_uuid(job_code) else None
        )
        if selected_job is None:
            raise Http404("No such ingest job")
        lines = lines.filter(job=selected_job)
    lines = (
        lines.select_related("job")
        .defer("raw", "raw_data")
        .annotate(preview=Substr("raw", 1, RAW_PREVIEW_CHARS))
        .order_by("-job__created", "job_id", "line_no")
    )
    page = Paginator(lines, LINES_PER_PAGE).get_page(request.GET.get("page"))
    jobs_with_lines = (
        IngestJob.objects.filter(team=team)
        .filter(Q(quarantined__gt=0) | Q(pk=selected_job.pk if selected_job else None))
        .only("code", "filename", "created", "quarantined")
        .order_by("-created")[:200]
    )
    filters = {k: v for k, v in (("reason", reason), ("job", job_code)) if v}
    ctx = {
        "team": team,
        "lines_page": page,
        "reasons": reasons,
        "reason": reason,
        "selected_job": selected_job,
        "jobs_with_lines": jobs_with_lines,
        "filter_query": urlencode(filters),
    }
    if request.htmx:
        return render(request, "capture/quarantine.html#lines-region", ctx)
    return render(request, "capture/quarantine.html", ctx)


def _is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _get_line(team: Team, line_id: int) -> LineRecord:
    line = LineRecord.objects.filter(team=team, pk=line_id).select_related("job").first()
    if line is None:
        raise Http404("No such line")
    return line


@login_required
def line_detail(request: HttpRequest, team_slug: str, line_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    line = _get_line(team, line_id)
    text = line.raw
    ctx = {
        "team": team,
        "line": line,
        "text": text[:RAW_PAGE_CHARS],
        "cut": len(text) > RAW_PAGE_CHARS,
        "escaped": line.raw_data is not None,
    }
    return render(request, "capture/line.html", ctx)


@login_required
def line_raw(request: HttpRequest, team_slug: str, line_id: int) -> HttpResponse:
    """The line's exact bytes, as a download (never rendered as HTML)."""
    team = get_team_for_user(request, team_slug)
    line = _get_line(team, line_id)
    response = HttpResponse(line.exact_raw(), content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="job-{line.job.code}-line-{line.line_no}.txt"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


# --- watched folders -----------------------------------------------------------------------------


def _folders(team: Team):
    files = WatchedFile.objects.select_related("job").order_by("path", "pk")
    return WatchedFolder.objects.filter(team=team).prefetch_related(Prefetch("files", queryset=files))


@login_required
def watched_folders(request: HttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    is_admin = team.is_admin(request.user)
    form = None
    if is_admin:
        form = WatchedFolderForm(request.POST or None, team=team)
        if request.method == "POST" and form.is_valid():
            folder = form.save()
            messages.success(
                request, f"Watching {folder.path} for {folder.pattern}; the first scan runs shortly."
            )
            return redirect("ingest_watch", team_slug=team.slug)
    elif request.method == "POST":
        raise Http404("Team admins only")
    ctx = {
        "team": team,
        "is_admin": is_admin,
        "form": form,
        "folders": _folders(team),
        "allowed_roots": settings.INGEST_WATCH_DIRS,
    }
    if request.htmx:
        return render(request, "capture/watch.html#folders-region", ctx)
    return render(request, "capture/watch.html", ctx, status=400 if form is not None and form.errors else 200)


@login_required
@require_POST
def watched_folder_toggle(request: HttpRequest, team_slug: str, folder_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    folder = _get_folder(team, folder_id)
    folder.enabled = not folder.enabled
    folder.save(update_fields=["enabled"])
    messages.success(request, f"{folder.path}: {'enabled' if folder.enabled else 'paused'}.")
    return redirect("ingest_watch", team_slug=team.slug)


@login_required
@require_POST
def watched_folder_scan(request: HttpRequest, team_slug: str, folder_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    folder = _get_folder(team, folder_id)
    from ingest.tasks import scan_watched_folders

    transaction.on_commit(lambda: scan_watched_folders.delay(folder.pk))
    messages.success(request, f"Scan of {folder.path} requested.")
    return redirect("ingest_watch", team_slug=team.slug)


@login_required
@require_POST
def watched_folder_delete(request: HttpRequest, team_slug: str, folder_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, admin=True)
    folder = _get_folder(team, folder_id)
    path = folder.path
    folder.delete()
    messages.success(request, f"Stopped watching {path}. Jobs and calls already ingested are kept.")
    return redirect("ingest_watch", team_slug=team.slug)
