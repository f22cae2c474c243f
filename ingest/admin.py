from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin

from ingest.capture.models import (
    Agent,
    BulkArgument,
    BulkContent,
    CaptureSession,
    IngestJob,
    LineRecord,
    TeamCaptureSettings,
    ToolCall,
    WatchedFile,
    WatchedFolder,
)
from ingest.discovery.models import (
    DiscoveryCall,
    DiscoveryCompaction,
    DiscoveryLoad,
    DiscoveryRequest,
    DiscoverySearch,
    SessionDiscoverySummary,
)
from ingest.fidelity.models import FidelityDaily, ModelPrice, ReferenceDocument, ReferenceFingerprint
from ingest.otel.models import MeasuredRequest, SentTools, TelemetryAgent

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin, TabularInline
else:
    # The type checker sees Django's generic admin classes; at runtime they take no parameters
    # (django-stubs-ext, which would teach them, is a development dependency only).
    class ModelAdmin(admin.ModelAdmin):
        def __class_getitem__(cls, _: Any) -> type:
            return cls

    class TabularInline(admin.TabularInline):
        def __class_getitem__(cls, _: Any) -> type:
            return cls


@admin.register(Agent)
class AgentAdmin(ModelAdmin[Agent]):
    list_display = ["family", "name", "version", "title", "team", "last_seen"]
    list_filter = ["team", "family"]


@admin.register(CaptureSession)
class CaptureSessionAdmin(ModelAdmin[CaptureSession]):
    list_display = ["session_key", "format", "server_label", "agent", "first_ts"]
    list_filter = ["team", "format"]


class BulkArgumentInline(TabularInline[BulkArgument, ToolCall]):
    model = BulkArgument
    extra = 0
    fields = ["pointer", "kind", "bytes", "sha256", "verdict", "expected_source"]
    readonly_fields = ["pointer", "kind", "bytes", "sha256", "verdict", "expected_source"]


@admin.register(ToolCall)
class ToolCallAdmin(ModelAdmin[ToolCall]):
    list_display = [
        "server_label",
        "tool",
        "agent",
        "request_ts",
        "bulk_count",
        "is_reference_call",
        "is_error",
    ]
    list_filter = ["team", "source_format", "is_reference_call"]
    search_fields = ["tool", "server_label", "client_call_id", "dedupe_key"]
    raw_id_fields = ["job", "session", "agent", "server", "linked_call"]
    inlines = [BulkArgumentInline]


@admin.register(BulkArgument)
class BulkArgumentAdmin(ModelAdmin[BulkArgument]):
    list_display = ["call", "pointer", "bytes", "verdict", "expected_source"]
    list_filter = ["verdict", "kind"]
    raw_id_fields = ["call", "content"]


@admin.register(BulkContent)
class BulkContentAdmin(ModelAdmin[BulkContent]):
    list_display = ["sha256", "team", "bytes", "is_array", "created"]
    exclude = ["text"]


@admin.register(IngestJob)
class IngestJobAdmin(ModelAdmin[IngestJob]):
    list_display = ["filename", "team", "source", "format", "status", "lines_read", "stored", "quarantined"]
    list_filter = ["team", "status", "source"]


@admin.register(LineRecord)
class LineRecordAdmin(ModelAdmin[LineRecord]):
    list_display = ["job", "line_no", "status", "reason"]
    list_filter = ["status", "reason"]
    raw_id_fields = ["job"]


@admin.register(WatchedFolder)
class WatchedFolderAdmin(ModelAdmin[WatchedFolder]):
    list_display = ["path", "pattern", "team", "enabled", "last_scan_at"]


@admin.register(WatchedFile)
class WatchedFileAdmin(ModelAdmin[WatchedFile]):
    list_display = ["path", "folder", "offset", "line_no", "last_read_at"]


admin.site.register(TeamCaptureSettings)


class ReferenceFingerprintInline(TabularInline[ReferenceFingerprint, ReferenceDocument]):
    model = ReferenceFingerprint
    extra = 0
    can_delete = False
    readonly_fields = ["kind", "value"]
    exclude = ["team"]


@admin.register(ReferenceDocument)
class ReferenceDocumentAdmin(ModelAdmin[ReferenceDocument]):
    list_display = ["name", "team", "source", "bytes", "lines", "sha256", "created"]
    list_filter = ["team", "source"]
    search_fields = ["name", "url", "sha256"]
    exclude = ["text"]
    inlines = [ReferenceFingerprintInline]


@admin.register(ModelPrice)
class ModelPriceAdmin(ModelAdmin[ModelPrice]):
    list_display = [
        "model",
        "agent_family",
        "team",
        "is_default",
        "input_usd_per_mtok",
        "output_usd_per_mtok",
    ]
    list_filter = ["team", "agent_family"]


@admin.register(FidelityDaily)
class FidelityDailyAdmin(ModelAdmin[FidelityDaily]):
    list_display = [
        "day",
        "team",
        "agent",
        "server_label",
        "tool",
        "verdict",
        "size_bucket",
        "calls",
        "arguments",
    ]
    list_filter = ["team", "verdict", "size_bucket"]
    raw_id_fields = ["agent"]
    date_hierarchy = "day"


@admin.register(ReferenceFingerprint)
class ReferenceFingerprintAdmin(ModelAdmin[ReferenceFingerprint]):
    list_display = ["document", "kind", "value"]
    list_filter = ["kind"]
    search_fields = ["value"]
    raw_id_fields = ["document"]


# Tool discovery (deferred loading) and telemetry: read-mostly records the ingest writes; the admin
# lists them for inspection, by session.
@admin.register(DiscoverySearch)
class DiscoverySearchAdmin(ModelAdmin[DiscoverySearch]):
    list_display = ["session", "at", "search_tool", "query", "missed", "total_deferred"]
    list_filter = ["search_tool", "missed"]
    raw_id_fields = ["session"]


@admin.register(DiscoveryLoad)
class DiscoveryLoadAdmin(ModelAdmin[DiscoveryLoad]):
    list_display = ["session", "tool", "server_label", "at", "calls", "requests_after"]
    search_fields = ["tool", "server_label"]
    raw_id_fields = ["session", "search"]


@admin.register(DiscoveryCall)
class DiscoveryCallAdmin(ModelAdmin[DiscoveryCall]):
    list_display = ["session", "tool", "server_label", "at"]
    search_fields = ["tool", "server_label"]
    raw_id_fields = ["session"]


@admin.register(DiscoveryCompaction)
class DiscoveryCompactionAdmin(ModelAdmin[DiscoveryCompaction]):
    list_display = ["session", "at", "key"]
    raw_id_fields = ["session"]


@admin.register(DiscoveryRequest)
class DiscoveryRequestAdmin(ModelAdmin[DiscoveryRequest]):
    list_display = ["session", "at", "key"]
    raw_id_fields = ["session"]


@admin.register(SessionDiscoverySummary)
class SessionDiscoverySummaryAdmin(ModelAdmin[SessionDiscoverySummary]):
    list_display = ["session", "total_deferred"]
    raw_id_fields = ["session"]


@admin.register(MeasuredRequest)
class MeasuredRequestAdmin(ModelAdmin[MeasuredRequest]):
    list_display = ["team", "session", "agent", "at", "model", "input_tokens", "output_tokens"]
    list_filter = ["team", "model"]
    raw_id_fields = ["session", "agent", "job"]


@admin.register(SentTools)
class SentToolsAdmin(ModelAdmin[SentTools]):
    list_display = ["team", "session", "at", "mode", "tool_count", "deferred_count", "loaded_count"]
    list_filter = ["team", "mode"]
    raw_id_fields = ["session", "agent", "job"]


@admin.register(TelemetryAgent)
class TelemetryAgentAdmin(ModelAdmin[TelemetryAgent]):
    list_display = ["team", "agent", "last_received", "last_event"]
    list_filter = ["team"]
    raw_id_fields = ["agent"]
