"""A request that runs into a broker or database outage answers 503 with Retry-After, not 500.

The outage is recorded (dashboard.system.outages) where the health page reads it. API paths get
JSON (`{"detail": ...}`), pages a short plain-text answer; anything else is left to Django.
A view's exception reaches `process_exception`; one raised elsewhere (a middleware saving the
session) reaches Django's 500 handler, which is `server_error` below (config/urls.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from dashboard.system import outages


def unavailable(request: HttpRequest, exc: BaseException) -> HttpResponse | None:
    """The 503 for `exc` when it is an outage (recorded), else None."""
    kind = outages.record_exception(exc, f"{request.method} {request.path}"[:200])
    if kind is None:
        return None
    retry = exc.retry_after if isinstance(exc, outages.ServiceUnavailable) else outages.RETRY_AFTER_SECONDS
    message = exc.detail if isinstance(exc, outages.ServiceUnavailable) else outages.unavailable_message(kind)
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message, "unavailable": kind}, status=503)
    else:
        response = HttpResponse(message, status=503, content_type="text/plain; charset=utf-8")
    response["Retry-After"] = str(retry)
    return response


class OutageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return unavailable(request, exc)


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's `handler500`: an outage still answers 503 (recorded); anything else is the 500."""
    exc = sys.exc_info()[1]
    if exc is not None:
        response = unavailable(request, exc)
        if response is not None:
            return response
    return defaults.server_error(request)
