"""Dashboard models live in their sub-packages; Django looks for an app's models here."""

from dashboard.alerts.models import Alert, AlertState, Budget, Level, Measure
from dashboard.alerts.notify.models import (
    AttemptStatus,
    Channel,
    ChannelKind,
    Delivery,
    DeliveryStatus,
    EventKind,
    Notification,
    NotificationEvent,
)
from dashboard.servers.models import (
    McpServer,
    PollOutcome,
    PollRun,
    Snapshot,
    SnapshotTool,
    Stack,
    ToolsDocument,
    Transport,
)
from dashboard.system.models import OutageRecord, WorkerHeartbeat
from dashboard.teams.models import ApiToken, Invite, Membership, Team

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
    "Invite",
    "Notification",
    "NotificationEvent",
    "Level",
    "Measure",
    "Budget",
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
    "OutageRecord",
    "WorkerHeartbeat",
]
