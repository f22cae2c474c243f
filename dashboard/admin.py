from django.contrib import admin

from dashboard.models import ApiToken, Membership, Team, WorkerHeartbeat


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "context_window", "created"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["team", "user", "role", "created"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "key_id", "created", "last_used_at", "revoked_at"]
    list_filter = ["team"]
    search_fields = ["name", "key_id"]
    # The hash is useless to an operator and the secret is never stored.
    exclude = ["secret_hash"]
    readonly_fields = ["key_id", "created", "last_used_at"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "last_seen"]
