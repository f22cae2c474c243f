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
from ingest.fidelity.models import (
    FidelityDaily,
    ModelPrice,
    ReferenceDocument,
    ReferenceFingerprint,
    SizeBucket,
    Verdict,
)

__all__ = [
    "Agent",
    "BulkArgument",
    "BulkContent",
    "CaptureSession",
    "FidelityDaily",
    "IngestJob",
    "LineRecord",
    "ModelPrice",
    "ReferenceDocument",
    "ReferenceFingerprint",
    "SizeBucket",
    "TeamCaptureSettings",
    "ToolCall",
    "Verdict",
    "WatchedFile",
    "WatchedFolder",
]
