"""Ingest models live in their sub-packages; Django looks for an app's models here."""

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
from ingest.fidelity.models import (
    FidelityDaily,
    ModelPrice,
    ReferenceDocument,
    ReferenceFingerprint,
    SizeBucket,
    Verdict,
)
from ingest.otel.models import MeasuredRequest, SentTools, TelemetryAgent

__all__ = [
    "Agent",
    "BulkArgument",
    "BulkContent",
    "CaptureSession",
    "DiscoveryCall",
    "DiscoveryCompaction",
    "DiscoveryLoad",
    "DiscoveryRequest",
    "DiscoverySearch",
    "FidelityDaily",
    "IngestJob",
    "LineRecord",
    "MeasuredRequest",
    "ModelPrice",
    "ReferenceDocument",
    "ReferenceFingerprint",
    "SentTools",
    "SessionDiscoverySummary",
    "SizeBucket",
    "TeamCaptureSettings",
    "TelemetryAgent",
    "ToolCall",
    "Verdict",
    "WatchedFile",
    "WatchedFolder",
]
