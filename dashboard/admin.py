from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from dashboard.alerts.models import Alert, Budget
from dashboard.alerts.notify.models import Channel, Delivery, Notification, NotificationEvent
from dashboard.servers.models import (
    McpServer,
    PollRun,
    ProviderCount,
    Snapshot,
    SnapshotTool,
    Stack,
    ToolsDocument,
)
from dashboard.system.models import OutageRecord, WorkerHeartbeat
from dashboard.teams.models import ApiToken, Invite, Membership, Team
from dashboard.teams.services import announce_team


class MembershipInline(admin.TabularInline[Membership, Team]):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin[Team]):
    list_display = ["name", "slug", "context_window", "created"]
    # The provider key is set with `manage.py set_provider_key`, never shown back.
    exclude = ["provider_keys"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change:
            announce_team(obj)  # a new team gets its default budgets


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin[Membership]):
    list_display = ["team", "user", "role", "created"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ["name", "team", "key_id", "created", "last_used_at", "revoked_at"]
    list_filter = ["team"]
    search_fields = ["name", "key_id"]
    # The hash is useless to an operator and the secret is never stored.
    exclude = ["secret_hash"]
    readonly_fields = ["key_id", "created", "last_used_at"]


@admin.register(Invite)
class InviteAdmin(admin.ModelAdmin[Invite]):
    list_display = [
        "team",
        "role",
        "email",
        "key_id",
        "created_by",
        "created",
        "expires_at",
        "accepted_by",
        "revoked_at",
    ]
    list_filter = ["team", "role"]
    search_fields = ["email", "key_id", "team__name"]
    # Only the hash of the link's secret is stored, and it is useless to an operator.
    exclude = ["secret_hash"]
    readonly_fields = ["key_id", "created", "accepted_at", "accepted_by", "revoked_by"]
    raw_id_fields = ["created_by"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin[WorkerHeartbeat]):
    list_display = ["hostname", "last_seen"]


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin[McpServer]):
    list_display = ["name", "team", "transport", "enabled", "last_outcome", "last_poll_at", "next_poll_at"]
    list_filter = ["team", "transport", "enabled", "last_outcome"]
    search_fields = ["name", "url", "command"]
    # Secrets stay encrypted and out of the admin; edit them on the server page.
    exclude = ["env", "headers"]
    readonly_fields = ["current_snapshot", "polling_since", "consecutive_failures", "last_error"]


@admin.register(Stack)
class StackAdmin(admin.ModelAdmin[Stack]):
    list_display = ["name", "team", "source", "created"]
    filter_horizontal = ["servers"]


class SnapshotToolInline(admin.TabularInline[SnapshotTool, Snapshot]):
    model = SnapshotTool
    extra = 0
    can_delete = False
    readonly_fields = ["position", "name", "tokens", "description_tokens", "schema_tokens", "sha256"]


@admin.register(Snapshot)
class SnapshotAdmin(admin.ModelAdmin[Snapshot]):
    list_display = ["server", "server_version", "fixed_tax_tokens", "tool_count", "first_seen", "last_seen"]
    list_filter = ["server__team", "is_release"]
    search_fields = ["server__name", "server_version", "sha256"]
    raw_id_fields = ["server", "previous", "document"]
    inlines = [SnapshotToolInline]


@admin.register(SnapshotTool)
class SnapshotToolAdmin(admin.ModelAdmin[SnapshotTool]):
    list_display = ["name", "snapshot", "tokens", "description_tokens", "schema_tokens"]
    search_fields = ["name"]
    raw_id_fields = ["snapshot"]


@admin.register(ToolsDocument)
class ToolsDocumentAdmin(admin.ModelAdmin[ToolsDocument]):
    list_display = ["sha256", "created"]
    search_fields = ["sha256"]


@admin.register(PollRun)
class PollRunAdmin(admin.ModelAdmin[PollRun]):
    list_display = ["server", "started", "duration_ms", "outcome", "changed", "trigger"]
    list_filter = ["outcome", "trigger", "server__team"]
    raw_id_fields = ["server", "snapshot"]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin[Budget]):
    list_display = ["team", "measure", "level", "limit", "server", "stack", "enabled"]
    list_filter = ["team", "measure", "level"]


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin[Alert]):
    list_display = ["subject_label", "measure", "level", "state", "value", "limit", "opened_at"]
    list_filter = ["team", "state", "level", "measure"]
    search_fields = ["subject_label", "rule_key"]
    raw_id_fields = ["server", "stack", "snapshot", "resolved_snapshot", "budget"]


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin[Channel]):
    list_display = ["name", "team", "kind", "enabled", "min_level", "last_status", "last_attempt_at"]
    list_filter = ["team", "kind", "enabled"]
    # URLs and secrets stay encrypted and out of the admin; manage them on the channel page.
    exclude = ["config"]
    readonly_fields = ["disabled_reason", "disabled_at", "last_attempt_at", "last_status"]


@admin.register(NotificationEvent)
class NotificationEventAdmin(admin.ModelAdmin[NotificationEvent]):
    list_display = ["kind", "team", "level", "alert", "created"]
    list_filter = ["kind", "team"]
    raw_id_fields = ["alert"]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin[Delivery]):
    list_display = ["event", "channel", "status", "attempts", "processed"]
    list_filter = ["status"]
    raw_id_fields = ["event", "channel"]


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin[Notification]):
    list_display = ["channel", "attempt", "status", "http_status", "created"]
    list_filter = ["status"]
    raw_id_fields = ["delivery", "channel"]


@admin.register(ProviderCount)
class ProviderCountAdmin(admin.ModelAdmin[ProviderCount]):
    list_display = ["snapshot", "provider", "model", "input_tokens", "ours", "ours_encoding", "created"]
    list_filter = ["provider", "snapshot__server__team"]
    raw_id_fields = ["snapshot"]


@admin.register(OutageRecord)
class OutageRecordAdmin(admin.ModelAdmin[OutageRecord]):
    list_display = ["kind", "source", "count", "first_at", "last_at", "where"]
    list_filter = ["kind"]
