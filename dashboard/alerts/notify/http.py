"""One HTTP POST with the failure classification every HTTP sender shares.

The attempt's error is shown on the channel page, so it names the class of failure and the HTTP
status, never the receiver's body: a channel URL pointed at some internal service must not read
its replies out. The body goes to the log, for the operator.
"""

from __future__ import annotations

import logging

import httpx
from django.conf import settings

from dashboard import outbound
from dashboard.alerts.notify.base import SendError, SendResult
from mcptax.outbound import OutboundRefused, PinnedTransport

log = logging.getLogger(__name__)

USER_AGENT = "mcp-tax-notify/1"
LOGGED_BODY_CHARS = 300


def http_timeout() -> float:
    return float(settings.NOTIFY_HTTP_TIMEOUT)


def post(url: str, *, content: bytes, headers: dict[str, str], what: str = "the receiver") -> SendResult:
    """POST `content`; 2xx is success, 429/5xx/network trouble is transient, other answers permanent.

    The connection goes only where the outbound policy allows (resolved once, connected to the
    checked address); a refusal is permanent until someone changes the URL or the policy.
    Redirects are not followed: a webhook that moved must be reconfigured, and following one
    would send the payload (and its signature) somewhere nobody chose.
    """
    if not url.startswith(("http://", "https://")):
        raise SendError(f"not an http(s) URL: {url[:60]!r}", permanent=True)
    try:
        with httpx.Client(transport=PinnedTransport(outbound.policy()), timeout=http_timeout()) as client:
            response = client.post(
                url,
                content=content,
                headers={"User-Agent": USER_AGENT, **headers},
                follow_redirects=False,
            )
    except OutboundRefused as exc:
        raise SendError(f"refused by the outbound policy: {exc}", permanent=True) from exc
    except httpx.TimeoutException as exc:
        raise SendError(f"timed out after {http_timeout():g}s ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise SendError(f"connection failed: {type(exc).__name__}: {exc}") from exc
    status = response.status_code
    if 200 <= status < 300:
        return SendResult(http_status=status)
    log.warning(
        "POST to %s answered HTTP %s (location %r): %r",
        what,
        status,
        response.headers.get("location", ""),
        response.text[:LOGGED_BODY_CHARS],
    )
    detail = f"HTTP {status} from {what}"
    if status == 429 or status >= 500:
        raise SendError(detail, http_status=status)
    if 300 <= status < 400:
        detail += " (a redirect, not followed)"
    raise SendError(detail, permanent=True, http_status=status)
