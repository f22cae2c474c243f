"""Any service Apprise knows, through its URL (discord://, msteams://, ntfy://, tgram://, json://...).

Apprise opens its own connections, so the outbound policy cannot pin them. What it can do: the
host named in the URL (the one self-hosted services such as json://, ntfy:// or mailto:// connect
to) is resolved and checked by the same policy when the channel is saved and again before each
send. Apprise resolves the name again when it connects, so a name whose DNS answer changes in
between is not caught here, as the pinned HTTP senders would catch it.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from dashboard import outbound
from dashboard.alerts.notify.base import Message, Sender, SendError, SendResult
from mcptax.outbound import OutboundRefused

if TYPE_CHECKING:
    import apprise

log = logging.getLogger(__name__)


def _apprise() -> apprise.Apprise:
    """A new Apprise instance; the library (a few hundred plugins) is imported on first use only."""
    import apprise

    return apprise.Apprise()


# Apprise's failure lines end in "error=<status>." when a service answered; the rest of the line
# may carry the service's own words, which stay in the log.
_STATUS = re.compile(r"error=(\d{3})\b")


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def target_host(url: str) -> tuple[str, int] | None:
    """The host and port Apprise parsed from ``url`` (None when it names none or is not understood)."""
    import apprise

    plugin = apprise.Apprise.instantiate(url)
    host = str(getattr(plugin, "host", "") or "").strip("[]") if plugin else ""
    if not host:
        return None
    port = getattr(plugin, "port", None)
    return host, int(port) if port else (443 if getattr(plugin, "secure", True) else 80)


def policy_problem(url: str) -> str | None:
    """Why the outbound policy refuses the URL's host, or None."""
    target = target_host(url)
    if target is None:
        return None
    try:
        outbound.policy().resolve(*target)
    except OutboundRefused as exc:
        return f"refused by the outbound policy: {exc}"
    except OSError:
        return None  # not resolvable now; Apprise's own connection attempt will say so
    return None


def validate_url(url: str) -> str | None:
    """None when Apprise accepts the URL and its host is allowed, else why not (for the channel form)."""
    if not _apprise().add(url):
        return "Apprise does not recognise this URL"
    return policy_problem(url)


class AppriseSender(Sender):
    kind = "apprise"

    def send(self, message: Message) -> SendResult:
        url = self.config.get("url", "")
        notifier = _apprise()
        if not notifier.add(url):
            raise SendError("Apprise does not recognise this URL", permanent=True)
        problem = policy_problem(url)
        if problem:
            raise SendError(problem, permanent=True)
        # Apprise reports failures only through its log; keep them so the attempt row says why.
        capture = _Capture()
        logger = logging.getLogger("apprise")
        logger.addHandler(capture)
        try:
            ok = notifier.notify(title=message.subject, body=message.text)
        finally:
            logger.removeHandler(capture)
        if not ok:
            log.warning("Apprise notification failed: %s", " | ".join(capture.lines[-3:]))
            statuses = [int(m.group(1)) for line in capture.lines if (m := _STATUS.search(line))]
            # Apprise hides the status code from its caller, so a failure cannot be told apart as
            # permanent; retries run out instead and the delivery gives up without disabling the channel.
            if statuses:
                raise SendError(
                    f"HTTP {statuses[-1]} from the service (via Apprise)", http_status=statuses[-1]
                )
            raise SendError("Apprise reported a failed notification (details in the worker log)")
        return SendResult()
