"""Dashboard models, one module per concept; import them here so Django finds them."""

from dashboard.models.alerts import Alert, AlertState, Level, Measure, Threshold
from dashboard.models.notify import (
    AttemptStatus,
    Channel,
    ChannelKind,
    Delivery,
    DeliveryStatus,
    EventKind,
    Notification,
    NotificationEvent,
)
from dashboard.models.servers import (
    McpServer,
    PollOutcome,
    PollRun,
    Snapshot,
    SnapshotTool,
    Stack,
    ToolsDocument,
    Transport,
)
from dashboard.models.system import WorkerHeartbeat
from dashboard.models.teams import ApiToken, Membership, Team

__all__ = [
    "Alert",
    "AlertState",
    "ApiToken",
    "AttemptStatus",
    "Channel",
    "ChannelKind",
    "Delivery",
    "DeliveryStatus",
    "EventKind",
    "Notification",
    "NotificationEvent",
    "Level",
    "Measure",
    "Threshold",
    "McpServer",
    "Membership",
    "PollOutcome",
    "PollRun",
    "Snapshot",
    "SnapshotTool",
    "Stack",
    "Team",
    "ToolsDocument",
    "Transport",
    "WorkerHeartbeat",
]
