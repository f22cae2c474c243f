"""Any service Apprise knows, through its URL (discord://, msteams://, ntfy://, tgram://, json://...).

Apprise opens its own connections, so the outbound policy cannot pin them. What it can do: every
host the URL names (the one self-hosted services such as json://, ntfy:// or mailto:// connect to,
and a server named in its options, such as mailto's ``smtp=``) is resolved and checked by the same
policy when the channel is saved and again before each send; HTTP redirects are never followed;
and a failure is worded the same whatever its cause, so a test send cannot map ports. Apprise resolves the name again when it connects, so a name whose DNS answer changes in
between is not caught here, as the pinned HTTP senders would catch it.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from dashboard import outbound
from dashboard.alerts.notify.base import Message, Sender, SendError, SendResult
from mcptax.outbound import OutboundRefused

if TYPE_CHECKING:
    import apprise

log = logging.getLogger(__name__)


def _apprise() -> apprise.Apprise:
    """A new Apprise instance that follows no redirect; the library (a few hundred plugins) is
    imported on first use only."""
    import apprise

    return apprise.Apprise(asset=apprise.AppriseAsset(http_redirects=False))


def _plugin(url: str) -> Any:
    """Apprise's notifier for ``url`` (None when not understood), set to follow no HTTP redirect
    whatever the URL says (``?redirect=yes``): a 3xx would send the alert (a 307 even its POST
    body) to a host the outbound policy never saw."""
    import apprise

    plugin = apprise.Apprise.instantiate(url, asset=apprise.AppriseAsset(http_redirects=False))
    if plugin:
        plugin.redirects = False
    return plugin or None


# Apprise's failure lines end in "error=<status>." when a service answered; the rest of the line
# may carry the service's own words, which stay in the log.
_STATUS = re.compile(r"error=(\d{3})\b")
FAILED = "The service did not accept the notification (via Apprise; the worker log has the details)."


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def target_hosts(plugin: Any) -> list[tuple[str, int]]:
    """Every (host, port) the notifier will connect to: the URL's host, and a server its options
    name (``mailto://...?smtp=HOST&port=N`` connects to HOST, not to the address's domain)."""
    port = getattr(plugin, "port", None)
    port = int(port) if port else (443 if getattr(plugin, "secure", True) else 80)
    hosts: dict[tuple[str, int], None] = {}  # in order, once each
    for name, value in vars(plugin).items():
        named = name == "host" or name.endswith(("_host", "_server"))
        if named and isinstance(value, str) and value.strip("[]"):
            hosts[(value.strip("[]"), port)] = None
    return list(hosts)


def policy_problem(url: str) -> str | None:
    """Why the outbound policy refuses a host the URL will reach, or None."""
    plugin = _plugin(url)
    if plugin is None:
        return None
    for host, port in target_hosts(plugin):
        try:
            outbound.policy().resolve(host, port)
        except OutboundRefused as exc:
            return f"refused by the outbound policy: {exc}"
        except OSError:
            continue  # not resolvable now; Apprise's own connection attempt will say so
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
        plugin = _plugin(url)
        if plugin is None or not notifier.add(plugin):
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
            # One wording for every failure (refused, no answer, an HTTP error, a redirect): which one
            # it was would tell whoever can press "Send test" what listens on a host and port.
            raise SendError(FAILED, http_status=statuses[-1] if statuses else None)
        return SendResult()
