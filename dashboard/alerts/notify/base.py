"""The transport interface: render a message for one channel and send it, or raise TransportError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


class TransportError(Exception):
    """A failed send. `permanent` means retrying cannot help (bad URL, 404, revoked token)."""

    def __init__(self, message: str, *, permanent: bool = False, http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.http_status = http_status


@dataclass
class SendResult:
    http_status: int | None = None


@dataclass
class Message:
    """What every transport renders from: the event payload plus plain-text forms of it."""

    payload: dict[str, Any]
    subject: str
    text: str


class Transport:
    kind: ClassVar[str] = ""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def send(self, message: Message) -> SendResult:
        raise NotImplementedError


def transport_for(kind: str, config: dict[str, Any]) -> Transport:
    from dashboard.alerts.notify.apprise_transport import AppriseTransport
    from dashboard.alerts.notify.email import EmailTransport
    from dashboard.alerts.notify.slack import SlackTransport
    from dashboard.alerts.notify.webhook import WebhookTransport

    classes = {cls.kind: cls for cls in (EmailTransport, SlackTransport, WebhookTransport, AppriseTransport)}
    if kind not in classes:
        raise TransportError(f"unknown channel kind {kind!r}", permanent=True)
    return classes[kind](config)
