"""Any service Apprise knows, through its URL (discord://, msteams://, ntfy://, tgram://, json://...)."""

from __future__ import annotations

import logging

import apprise

from dashboard.alerts.notify.base import Message, Sender, SendError, SendResult


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def validate_url(url: str) -> str | None:
    """None when Apprise accepts the URL, else why not (for the channel form)."""
    return None if apprise.Apprise().add(url) else "Apprise does not recognise this URL"


class AppriseSender(Sender):
    kind = "apprise"

    def send(self, message: Message) -> SendResult:
        notifier = apprise.Apprise()
        if not notifier.add(self.config.get("url", "")):
            raise SendError("Apprise does not recognise this URL", permanent=True)
        # Apprise reports failures only through its log; keep them so the attempt row says why.
        capture = _Capture()
        logger = logging.getLogger("apprise")
        logger.addHandler(capture)
        try:
            ok = notifier.notify(title=message.subject, body=message.text)
        finally:
            logger.removeHandler(capture)
        if not ok:
            # Apprise hides the status code, so a failure cannot be told apart as permanent;
            # retries run out instead and the delivery gives up without disabling the channel.
            raise SendError("; ".join(capture.lines[-3:]) or "Apprise reported a failed notification")
        return SendResult()
