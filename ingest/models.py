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
    Verdict,
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
)

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
    "ModelPrice",
    "ReferenceDocument",
    "ReferenceFingerprint",
    "SessionDiscoverySummary",
    "SizeBucket",
    "TeamCaptureSettings",
    "ToolCall",
    "Verdict",
    "WatchedFile",
    "WatchedFolder",
]
