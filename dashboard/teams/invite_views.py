"""Invite pages: create an invite (e-mail or link), revoke one, and the public accept page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from dashboard.htmx import HtmxHttpRequest, render_page
from dashboard.teams import invites
from dashboard.teams.access import Action, get_team_for_user, require_membership_change
from dashboard.teams.forms import InviteForm, SignupForm
from dashboard.teams.models import Invite
from dashboard.teams.services import TeamError

# The accept page logs a new account in directly; the throttling backend (axes) wants a request
# with credentials, which a fresh sign-up has already proven.
SIGNUP_BACKEND = "django.contrib.auth.backends.ModelBackend"


@never_cache  # the page shows a secret once: no cache may keep it
@login_required
@require_POST
def invite_create(request: HtmxHttpRequest, team_slug: str) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_MEMBERS)
    form = InviteForm(request.POST, with_owner=True)
    if not form.is_valid():
        problems = "; ".join(str(e) for errors in form.errors.values() for e in errors)
        messages.error(request, f"The invite was not created: {problems}")
        return redirect("team_members", team_slug=team.slug)
    role, email = form.cleaned_data["role"], form.cleaned_data["email"]
    require_membership_change(request, team, role)
    assert isinstance(request.user, User)
    try:
        invite, token = invites.create_invite(team, role, by=request.user, email=email)
    except TeamError as exc:
        messages.error(request, str(exc))
        return redirect("team_members", team_slug=team.slug)
    mail_error = invites.send_invite(invite, token) if invite.email else ""
    ctx = {"team": team, "invite": invite, "url": invites.invite_url(token), "mail_error": mail_error}
    return render(request, "teams/invite_created.html", ctx)


@login_required
@require_POST
def invite_revoke(request: HtmxHttpRequest, team_slug: str, invite_id: int) -> HttpResponse:
    team = get_team_for_user(request, team_slug, Action.MANAGE_MEMBERS)
    invite = get_object_or_404(team.invites.select_related("created_by"), pk=invite_id)
    require_membership_change(request, team, invite.role)
    assert isinstance(request.user, User)
    revoked = invites.revoke_invite(invite, request.user)
    if request.htmx:
        ctx = {"team": team, "i": invite}
        return render_page(request, "teams/members.html#invite-row", ctx)
    if revoked:
        messages.success(request, f"Invite {invite.display} revoked: its link no longer works.")
    else:
        messages.info(request, f"Invite {invite.display} was already {invite.get_status_display().lower()}.")
    return redirect("team_members", team_slug=team.slug)


def invite_accept(request: HtmxHttpRequest, token: str) -> HttpResponse:
    """Public: the invite's page. A logged-in user joins; a visitor signs up and joins."""
    invite = Invite.find(token)
    if invite is None:
        msg = "This invite link is not valid. Check that you copied all of it, or ask for a new one."
        return render(request, "teams/invite.html", {"problem": msg}, status=404)
    problem = invites.unusable_reason(invite)
    if problem:
        return render(request, "teams/invite.html", {"problem": problem, "invite": invite}, status=410)
    user = request.user if isinstance(request.user, User) else None
    member = user is not None and invite.team.memberships.filter(user=user).exists()
    form = SignupForm(initial={"email": invite.email})
    if request.method == "POST":
        if user is not None:
            return _join(request, invite, user)
        form = SignupForm(request.POST)
        if form.is_valid():
            try:
                with transaction.atomic():  # no account without the membership it was made for
                    new_user = form.save()
                    invites.accept_invite(invite, new_user)
            except TeamError as exc:
                return render(
                    request, "teams/invite.html", {"problem": str(exc), "invite": invite}, status=410
                )
            login(request, new_user, backend=SIGNUP_BACKEND)
            messages.success(request, f"Welcome, {new_user.username}: you joined {invite.team.name}.")
            return redirect("team_overview", team_slug=invite.team.slug)
    ctx = {"invite": invite, "form": form, "member": member, "token": token}
    return render(request, "teams/invite.html", ctx)


def _join(request: HtmxHttpRequest, invite: Invite, user: User) -> HttpResponse:
    try:
        invites.accept_invite(invite, user)
    except invites.AlreadyMember as exc:
        messages.info(request, f"{exc} The invite is left unused.")
        return redirect("team_overview", team_slug=invite.team.slug)
    except TeamError as exc:
        return render(request, "teams/invite.html", {"problem": str(exc), "invite": invite}, status=410)
    messages.success(request, f"You joined {invite.team.name} as {invite.get_role_display().lower()}.")
    return redirect("team_overview", team_slug=invite.team.slug)
