"""The sender interface (one per channel kind): render a message for one channel and send it, or raise SendError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


class SendError(Exception):
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
    """What every sender renders from: the event payload plus plain-text forms of it."""

    payload: dict[str, Any]
    subject: str
    text: str
    # The delivery this send belongs to: the same on every attempt, so a receiver can drop a repeat
    # (a worker that dies after the POST left but before it was recorded sends it once more).
    delivery_id: str = ""


class Sender:
    kind: ClassVar[str] = ""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def send(self, message: Message) -> SendResult:
        raise NotImplementedError
