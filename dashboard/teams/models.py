"""Teams own everything: servers, captures, budgets. Users see only their teams' data."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import models
from django.utils import timezone
from django.utils.text import slugify

from dashboard.crypto import EncryptedJSONField
from dashboard.teams import permissions
from dashboard.teams.validators import NameField


class TeamQuerySet(models.QuerySet["Team"]):
    def for_user(self, user: User | AnonymousUser) -> TeamQuerySet:
        if isinstance(user, AnonymousUser):
            return self.none()
        return self.filter(memberships__user=user)


PROTOCOL_ERAS = [
    ("handshake", "2025 revisions (initialize handshake), which today's clients speak"),
    ("modern", "2026-07-28 revision (server/discover)"),
]


class Team(models.Model):
    code = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = NameField(max_length=100)
    slug = models.SlugField(max_length=100, unique=True)
    context_window = models.PositiveIntegerField(
        default=200_000, help_text="Context window (tokens) the fixed tax is compared against."
    )
    token_encodings = models.JSONField(
        default=list,
        blank=True,
        help_text="Encodings the team's snapshots are counted in, main one first; empty: TOKEN_ENCODINGS.",
    )
    # Provider-exact counts (optional): {"anthropic": "<API key>"}, encrypted like server secrets.
    provider_keys = EncryptedJSONField(blank=True, default=dict)
    anthropic_model = models.CharField(
        max_length=100, blank=True, default="claude-sonnet-4-5", help_text="Model the provider counts for."
    )
    # Which protocol revision the team's figures follow when a server lists its tools differently in
    # each: the handshake era (the 2025 revisions, which the clients teams run speak today) or
    # the 2026-07-28 revision. The other era's figure is kept beside each snapshot (Snapshot.eras).
    protocol_era = models.CharField(
        max_length=20,
        choices=PROTOCOL_ERAS,
        default="handshake",
        help_text="The protocol revision the team's figures follow when a server's tools differ by revision.",
    )
    # The client whose loading mode the pages lead with (mcptax.loading.PRESETS), and the team's
    # ENABLE_TOOL_SEARCH for Claude Code (blank: unset, which recent releases treat as "defer").
    loading_client = models.CharField(max_length=30, default="claude-code", blank=True)
    tool_search = models.CharField("ENABLE_TOOL_SEARCH", max_length=20, blank=True)
    created = models.DateTimeField(default=timezone.now)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.slug:
            self.slug = self._unique_slug()
        super().save(*args, **kwargs)

    def _unique_slug(self) -> str:
        base = slugify(self.name)[:90] or "team"
        slug, n = base, 2
        while Team.objects.filter(slug=slug).exclude(pk=self.pk).exists():
            slug, n = f"{base}-{n}", n + 1
        return slug

    def tracked_encodings(self) -> list[str]:
        """The encodings this team tracks, main one first (the team's choice, else the setting)."""
        chosen = [str(e) for e in (self.token_encodings or []) if e]
        return chosen or list(settings.TOKEN_ENCODINGS) or ["cl100k_base"]

    @property
    def main_encoding(self) -> str:
        return self.tracked_encodings()[0]

    def role_of(self, user: User | AnonymousUser) -> str | None:
        if isinstance(user, AnonymousUser):
            return None
        membership = self.memberships.filter(user=user).first()
        return membership.role if membership else None


class Membership(models.Model):
    class Role(models.TextChoices):
        # The values are dashboard.teams.permissions.Role's: the matrix is keyed by them.
        OWNER = permissions.Role.OWNER.value, "Owner"
        ADMIN = permissions.Role.ADMIN.value, "Admin"
        MEMBER = permissions.Role.MEMBER.value, "Member"
        VIEWER = permissions.Role.VIEWER.value, "Viewer (read-only)"

    team = models.ForeignKey(Team, models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="unique_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


TOKEN_PREFIX = "mcpt"


def _hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiToken(models.Model):
    """A team credential for machine clients (CI gate, proxy push).

    Only a sha256 of the secret is stored; the full token is shown once, at creation. The
    public `key_id` part lets us find the row without comparing hashes across the table.
    """

    team = models.ForeignKey(Team, models.CASCADE, related_name="api_tokens")
    name = NameField(max_length=100)
    key_id = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} ({TOKEN_PREFIX}_{self.key_id}_…)"

    @classmethod
    def issue(cls, team: Team, name: str, created_by: User | None = None) -> tuple[ApiToken, str]:
        """Create a token; return the row and the plaintext token (never stored)."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        token = cls.objects.create(
            team=team, name=name, key_id=key_id, secret_hash=_hash_secret(secret), created_by=created_by
        )
        return token, f"{TOKEN_PREFIX}_{key_id}_{secret}"

    @classmethod
    def authenticate(cls, plaintext: str) -> ApiToken | None:
        parts = plaintext.strip().split("_", 2)
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
            return None
        _, key_id, secret = parts
        token: ApiToken | None = cls.objects.active().select_related("team").filter(key_id=key_id).first()
        if token is None or not hmac.compare_digest(token.secret_hash, _hash_secret(secret)):
            return None
        # Avoid a write on every request: a minute's precision is enough for "last used".
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            cls.objects.filter(pk=token.pk).update(last_used_at=now)
        return token

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])

    @property
    def display(self) -> str:
        return f"{TOKEN_PREFIX}_{self.key_id}_…"


class InviteQuerySet(models.QuerySet["Invite"]):
    def pending(self) -> InviteQuerySet:
        """Neither used nor revoked, and not expired yet."""
        return self.filter(accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=timezone.now())


class Invite(models.Model):
    """A single-use invitation to join a team with a role, sent by e-mail or handed on as a link.

    Like an API token, only a sha256 of the secret is stored: the link (`/invite/<key_id>_<secret>/`)
    is shown once to the inviter and sent once by e-mail, never again. Accepting, revoking and expiry
    are timestamps, so the row stays as the record of who invited whom and who joined.
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Used"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"

    team = models.ForeignKey(Team, models.CASCADE, related_name="invites")
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    # Empty for a link handed on by hand; the address the link was sent to otherwise.
    email = models.EmailField(blank=True)
    key_id = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+"
    )

    objects = InviteQuerySet.as_manager()

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.team} as {self.role} ({self.email or 'link'}, {self.status})"

    @classmethod
    def issue(
        cls, team: Team, role: str, *, days: int, email: str = "", created_by: User | None = None
    ) -> tuple[Invite, str]:
        """Create an invite valid for `days`; return the row and the plaintext token (never stored)."""
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        now = timezone.now()
        invite = cls.objects.create(
            team=team,
            role=role,
            email=email,
            key_id=key_id,
            secret_hash=_hash_secret(secret),
            created_by=created_by,
            created=now,
            expires_at=now + timedelta(days=days),
        )
        return invite, f"{key_id}_{secret}"

    @classmethod
    def find(cls, plaintext: str) -> Invite | None:
        """The invite a token names, whatever its status; None for a token that names none."""
        key_id, sep, secret = plaintext.strip().partition("_")
        if not sep or not secret:
            return None
        invite: Invite | None = cls.objects.select_related("team").filter(key_id=key_id).first()
        if invite is None or not hmac.compare_digest(invite.secret_hash, _hash_secret(secret)):
            return None
        return invite

    @property
    def status(self) -> str:
        if self.accepted_at is not None:
            return self.Status.ACCEPTED
        if self.revoked_at is not None:
            return self.Status.REVOKED
        if self.expires_at <= timezone.now():
            return self.Status.EXPIRED
        return self.Status.PENDING

    def get_status_display(self) -> str:
        return str(self.Status(self.status).label)

    @property
    def display(self) -> str:
        return f"{self.key_id}_…"
