"""One HTTP POST with the failure classification every HTTP sender shares."""

from __future__ import annotations

import httpx
from django.conf import settings

from dashboard.alerts.notify.base import SendError, SendResult

USER_AGENT = "mcp-tool-tax-notify/1"


def http_timeout() -> float:
    return float(settings.NOTIFY_HTTP_TIMEOUT)


def post(url: str, *, content: bytes, headers: dict[str, str]) -> SendResult:
    """POST `content`; 2xx is success, 429/5xx/network trouble is transient, other answers permanent.

    Redirects are not followed: a webhook that moved must be reconfigured, and following one
    would send the payload (and its signature) somewhere nobody chose.
    """
    if not url.startswith(("http://", "https://")):
        raise SendError(f"not an http(s) URL: {url[:60]!r}", permanent=True)
    try:
        response = httpx.post(
            url,
            content=content,
            headers={"User-Agent": USER_AGENT, **headers},
            timeout=http_timeout(),
            follow_redirects=False,
        )
    except httpx.TimeoutException as exc:
        raise SendError(f"timed out after {http_timeout():g}s ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise SendError(f"connection failed: {type(exc).__name__}: {exc}") from exc
    status = response.status_code
    if 200 <= status < 300:
        return SendResult(http_status=status)
    body = response.text[:300].strip()
    detail = f"HTTP {status}" + (f": {body}" if body else "")
    if status == 429 or status >= 500:
        raise SendError(detail, http_status=status)
    if 300 <= status < 400:
        detail += f" (redirect to {response.headers.get('location', '?')} not followed)"
    raise SendError(detail, permanent=True, http_status=status)
