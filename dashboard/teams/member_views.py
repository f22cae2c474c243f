"""Team and membership pages: create a team, the members page, change a role, remove, leave."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.teams import selectors, services
from dashboard.teams.access import Action, allowed, get_team_for_user, require_membership_change
from dashboard.teams.forms import InviteForm, RoleForm, TeamForm, role_choices
from dashboard.teams.models import Membership, Team


def _user(request: HtmxHttpRequest) -> User:
    assert isinstance(request.user, User)  # every view here is login_required
    return request.user


@login_required
def team_create(request: HtmxHttpRequest) -> HttpResponse:
    """Any logged-in user may create a team and becomes its owner; a user with no team lands here."""
    form = TeamForm(request.POST or None)
    error = ""
    if request.method == "POST" and form.is_valid():
        try:
            team = services.create_team(form.cleaned_data["name"], _user(request), private=True)
        except services.TeamError as exc:
            error = str(exc)
        else:
            messages.success(
                request, f"Team {team.name} created; you are its owner. Invite your teammates here."
            )
            return redirect("team_members", team_slug=team.slug)
    first = not Team.objects.for_user(request.user).exists()
    return render(request, "teams/create.html", {"form": form, "error": error, "first": first})


def _rows(request: HtmxHttpRequest, team: Team) -> list[dict[str, Any]]:
    may_members = allowed(request, team, Action.MANAGE_MEMBERS)
    may_owners = allowed(request, team, Action.MANAGE_OWNERS)
    return [
        _row(request, m, may_members=may_members, may_owners=may_owners) for m in selectors.memberships(team)
    ]


def _row(request: HtmxHttpRequest, m: Membership, *, may_members: bool, may_owners: bool) -> dict[str, Any]:
    editable = may_members and (m.role != Membership.Role.OWNER or may_owners)
    return {"m": m, "editable": editable, "is_me": m.user_id == request.user.pk}


@login_required
def team_members(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug)
    may_owners = allowed(request, team, Action.MANAGE_OWNERS)
    ctx: dict[str, Any] = {
        "team": team,
        "rows": _rows(request, team),
        "roles": role_choices(with_owner=may_owners),
        "invite_form": InviteForm(with_owner=may_owners),
    }
    if allowed(request, team, Action.MANAGE_MEMBERS):
        ctx["pending"] = selectors.pending_invites(team)
        ctx["past"] = selectors.past_invites(team)
    return render(request, "teams/members.html", ctx)


@login_required
@require_POST
def member_role(request: HtmxHttpRequest, team_slug: str, membership_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_MEMBERS)
    membership = get_object_or_404(team.memberships.select_related("user"), pk=membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        return _after(request, team, membership, "Pick one of the roles in the list.", ok=False)
    role = form.cleaned_data["role"]
    require_membership_change(request, team, membership.role, role)
    try:
        membership = services.change_role(membership, role, _user(request))
    except services.TeamError as exc:
        return _after(request, team, membership, str(exc), ok=False)
    text = f"{membership.user.username} is now {membership.get_role_display().lower()}."
    return _after(request, team, membership, text, ok=True)


def _after(request: HtmxHttpRequest, team: Team, m: Membership, text: str, *, ok: bool) -> HttpResponse:
    """Answer a role change: the member's row for htmx (with the outcome in it), else the page."""
    if request.htmx:
        if ok and m.user_id == request.user.pk:
            # The user changed their own role: what the page may offer them changed with it.
            messages.success(request, text)
            return HttpResponseClientRedirect(reverse("team_members", args=[team.slug]))
        may_owners = allowed(request, team, Action.MANAGE_OWNERS)
        row = _row(request, m, may_members=True, may_owners=may_owners)
        ctx = {"team": team, "row": row, "roles": role_choices(with_owner=may_owners), "note": text, "ok": ok}
        return render_page(request, "teams/members.html#member-row", ctx)
    (messages.success if ok else messages.error)(request, text)
    return redirect("team_members", team_slug=team.slug)


@login_required
@require_POST
def member_remove(request: HtmxHttpRequest, team_slug: str, membership_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_MEMBERS)
    membership = get_object_or_404(team.memberships.select_related("user"), pk=membership_id)
    require_membership_change(request, team, membership.role)
    try:
        services.remove_member(membership, _user(request))
    except services.TeamError as exc:
        messages.error(request, str(exc))
        return redirect("team_members", team_slug=team.slug)
    if membership.user_id == request.user.pk:
        messages.success(request, f"You left {team.name}.")
        return redirect("home")
    messages.success(request, f"{membership.user.username} is no longer a member of {team.name}.")
    return redirect("team_members", team_slug=team.slug)


@login_required
@require_POST
def team_leave(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.LEAVE_TEAM)
    try:
        services.leave_team(team, _user(request))
    except services.TeamError as exc:
        messages.error(request, str(exc))
        return redirect("team_members", team_slug=team.slug)
    messages.success(request, f"You left {team.name}.")
    return redirect("home")
