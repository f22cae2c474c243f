"""Stacks: importing a client configuration file as a stack of servers, and the stacks page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.shortcuts import redirect, render

from dashboard.htmx import HtmxHttpRequest
from dashboard.servers import loading, selectors
from dashboard.servers.config_import import ConfigError, Importer, StackImport, import_config_text
from dashboard.servers.forms import ImportConfigForm
from dashboard.teams.access import Action, get_team_for_user, require, role_in


def _report_import(request: HtmxHttpRequest, imported: list[StackImport]) -> None:
    for result in imported:
        if result.refused:
            messages.error(request, f"Stack {result.name} left as it is: {result.refused}.")
            continue
        counts = [f"{len(result.created)} servers added", f"{len(result.updated)} updated"]
        counts.append(f"{len(result.unchanged)} unchanged")
        summary = f"Stack {result.name}: " + ", ".join(counts)
        conflicts = [f"{e.name}: {e.label()}" for e in result.entries if e.outcome == "conflict"]
        if conflicts:
            summary += "; same name, another definition: " + "; ".join(conflicts)
        off = [f"{e.server} ({e.reason})" for e in result.entries if e.disabled and e.outcome != "skipped"]
        if off:
            summary += f"; imported switched off: {', '.join(off)}"
        messages.success(request, summary + ".")
        if result.skipped:
            messages.warning(
                request,
                f"Stack {result.name}: skipped: "
                + "; ".join(f"{name} ({reason})" for name, reason in result.skipped.items())
                + ".",
            )
        if result.placeholders:
            messages.info(
                request,
                f"Stack {result.name}: unresolved placeholders kept as written: "
                + "; ".join(f"{n}: {', '.join(p)}" for n, p in result.placeholders.items()),
            )


@login_required
def stacks(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    form = ImportConfigForm(request.POST or None, request.FILES or None)
    if request.method == "POST":
        require(request, team, Action.IMPORT_STACK)
    if request.method == "POST" and form.is_valid():
        try:
            imported = import_config_text(
                team,
                form.cleaned_data["text"],
                filename=form.cleaned_data["filename"],
                stack_name=form.cleaned_data["stack_name"],
                source=form.cleaned_data["source"],
                importer=Importer(
                    role_in(request, team) or "", request.user if isinstance(request.user, User) else None
                ),
            )
        except ConfigError as exc:
            form.add_error(None, str(exc))
        else:
            _report_import(request, imported)
            return redirect("stacks", team_slug=team.slug)
    encoding = request.GET.get("encoding") or team.main_encoding
    encoding = encoding if encoding in team.tracked_encodings() else team.main_encoding
    ctx = {
        "team": team,
        "encoding": encoding,
        "encodings": team.tracked_encodings(),
        "stacks": selectors.stacks_with_totals(team, encoding, with_loading=True),
        "client_label": loading.PRESETS[loading.client_of(team)].label,
        "form": form,
        "window": team.context_window,
    }
    return render(request, "servers/stacks.html", ctx)
