"""Invites: issuing a link (and mailing it), accepting it once, revoking it.

A link is the credential: whoever holds it may join with its role, once, until it expires
(`INVITE_LINK_DAYS`). Accepting claims the invite with one conditional UPDATE, so two people
opening the same link at the same moment cannot both join. Who may invite with which role is the
role matrix's business (the views ask it).
"""

from __future__ import annotations

import logging
import smtplib

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.validators import validate_email
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from dashboard.origin import current_origin, site_url
from dashboard.teams.models import Invite, Membership, Team
from dashboard.teams.services import TeamError
from dashboard.teams.validators import one_line

logger = logging.getLogger("dashboard.teams")


class AlreadyMember(TeamError):
    """The user accepting is in the team already; the invite is left unused for someone else."""


def invite_url(token: str) -> str:
    """The accept link: on `SITE_URL`, else on the address the inviter's request came in on."""
    return site_url(current_origin()) + reverse("invite_accept", args=[token])


def create_invite(team: Team, role: str, *, by: User, email: str = "") -> tuple[Invite, str]:
    """A pending invite to `team` as `role`; returns the row and the token (shown once)."""
    if role not in Membership.Role.values:
        raise TeamError(f"{role!r} is not a role; pick one of {', '.join(Membership.Role.values)}.")
    email = email.strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise TeamError(f"{email!r} is not an e-mail address.") from None
        member = team.memberships.filter(user__email__iexact=email).select_related("user").first()
        if member is not None:
            raise TeamError(f"{email} is already a member of {team.name} ({member.user.username}).")
    invite, token = Invite.issue(team, role, days=settings.INVITE_LINK_DAYS, email=email, created_by=by)
    logger.info(
        "team %s: %s invited %s as %s (invite %s)",
        team.slug,
        by.username,
        email or "a link",
        role,
        invite.key_id,
    )
    return invite, token


def send_invite(invite: Invite, token: str) -> str:
    """Mail the link to the invite's address. Returns "" when sent, else why not (the invite stays
    valid: the inviter can hand the link on themselves)."""
    inviter = invite.created_by.username if invite.created_by else "A team admin"
    team = invite.team
    body = (
        f"{inviter} invites you to join the team {team.name} on mcp-tax as "
        f"{invite.get_role_display().lower()}.\n\n"
        f"Accept the invite (you can create an account there if you have none):\n{invite_url(token)}\n\n"
        f"The link works once and expires on {invite.expires_at:%Y-%m-%d %H:%M} UTC.\n"
        "If you did not expect this invite, ignore this message.\n"
    )
    message = EmailMessage(
        subject=one_line(f"{inviter} invites you to {team.name} on mcp-tax")[:200],
        body=body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[invite.email],
    )
    try:
        message.send(fail_silently=False)
    except (smtplib.SMTPException, OSError) as exc:
        logger.warning("team %s: invite %s not mailed: %s", team.slug, invite.key_id, exc)
        return f"{type(exc).__name__}: {exc}"
    return ""


def unusable_reason(invite: Invite) -> str:
    """Why the invite can no longer be accepted ("" while it can)."""
    status = invite.status
    if status == Invite.Status.ACCEPTED:
        return "This invite link has already been used: each link works once. Ask the team's admins for a new one."
    if status == Invite.Status.REVOKED:
        return (
            "This invite was revoked by the team. Ask the team's admins for a new one if you still need it."
        )
    if status == Invite.Status.EXPIRED:
        return (
            f"This invite link expired on {invite.expires_at:%Y-%m-%d %H:%M} UTC. "
            "Ask the team's admins for a new one."
        )
    return ""


def accept_invite(invite: Invite, user: User) -> Membership:
    """Make `user` a member with the invite's role and use the invite up, or raise TeamError."""
    with transaction.atomic():
        if Membership.objects.filter(team_id=invite.team_id, user=user).exists():
            raise AlreadyMember(f"You are already a member of {invite.team.name}.")
        claimed = (
            Invite.objects.pending().filter(pk=invite.pk).update(accepted_at=timezone.now(), accepted_by=user)
        )
        if not claimed:
            invite.refresh_from_db()
            raise TeamError(unusable_reason(invite) or "This invite can no longer be accepted.")
        membership = Membership.objects.create(team_id=invite.team_id, user=user, role=invite.role)
    logger.info(
        "team %s: %s joined as %s (invite %s)", invite.team.slug, user.username, invite.role, invite.key_id
    )
    return membership


def revoke_invite(invite: Invite, by: User) -> bool:
    """Revoke a pending invite; False when it was used or revoked already."""
    done = Invite.objects.filter(pk=invite.pk, accepted_at__isnull=True, revoked_at__isnull=True).update(
        revoked_at=timezone.now(), revoked_by=by
    )
    invite.refresh_from_db()
    if done:
        logger.info("team %s: %s revoked invite %s", invite.team.slug, by.username, invite.key_id)
    return bool(done)
