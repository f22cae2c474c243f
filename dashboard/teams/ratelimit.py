"""The per-token rate limit of the JSON API, one mechanism for every route that needs one.

A fixed one-minute window in the shared cache (Redis in production), so every web process counts
against the same budget; each route has its own budget (`scope`), per token. The window is read
from `clock` (wall-clock seconds), which tests replace to put requests where they want them
relative to a minute boundary instead of wherever the real clock happens to be.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.cache import cache
from django.http import JsonResponse

WINDOW_SECONDS = 60
clock: Callable[[], float] = time.time


def retry_after(scope: str, token_key: str, limit: int) -> int | None:
    """Count one request of this token against `scope`'s per-minute `limit`.

    Returns the seconds to wait when the budget of the current minute is used up, else None.
    A limit of 0 or less turns the limit off.
    """
    if limit <= 0:
        return None
    now = clock()
    window = int(now // WINDOW_SECONDS)
    key = f"{scope}-api-rate:{token_key}:{window}"
    cache.add(key, 0, timeout=WINDOW_SECONDS + 5)
    try:
        used = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=WINDOW_SECONDS + 5)
        used = 1
    if used <= limit:
        return None
    return max(1, int((window + 1) * WINDOW_SECONDS - now) + 1)


def _window_key(scope: str, token_key: str, now: float) -> tuple[str, int]:
    window = int(now // WINDOW_SECONDS)
    return f"{scope}-api-work:{token_key}:{window}", max(1, int((window + 1) * WINDOW_SECONDS - now) + 1)


def work_retry_after(scope: str, token_key: str, budget: float) -> int | None:
    """Seconds to wait when this token spent ``budget`` seconds of `scope`'s work in the current
    minute (``charge_work``), else None. A budget of 0 or less turns the bound off."""
    if budget <= 0:
        return None
    key, wait = _window_key(scope, token_key, time.time())
    spent_ms = cache.get(key) or 0
    return wait if spent_ms >= budget * 1000 else None


def charge_work(scope: str, token_key: str, seconds: float) -> None:
    """Add ``seconds`` of work to this token's count for the current minute."""
    key, _ = _window_key(scope, token_key, time.time())
    cache.add(key, 0, timeout=WINDOW_SECONDS + 5)
    try:
        cache.incr(key, max(1, round(seconds * 1000)))
    except ValueError:  # expired between add and incr
        cache.add(key, max(1, round(seconds * 1000)), timeout=WINDOW_SECONDS + 5)


def too_many_requests(scope: str, limit: int, wait: int, setting: str, detail: str = "") -> JsonResponse:
    """The 429 answer, with Retry-After and the setting that sets the limit (``detail`` replaces
    the request-count wording)."""
    response = JsonResponse(
        {
            "detail": detail
            or f"Rate limit of {limit} {scope} requests per minute for this token reached "
            f"({setting}); retry in {wait} s."
        },
        status=429,
    )
    response["Retry-After"] = str(wait)
    return response
