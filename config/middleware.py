"""Middleware of our own.

`RejectNulMiddleware` answers 400 to any request with a NUL character in its path, query string or
urlencoded form fields. A NUL is never meaningful in any of them, and PostgreSQL refuses it in
text, so without this check it surfaced as a 500 in whichever query first used the value. JSON
fields and multipart form fields are checked by their schemas and forms (multipart bodies are
left alone here: reading them would run the upload handlers before the view installs its own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

NUL = "\x00"
MESSAGE = "The request contains a NUL character (%00) in its {where}; it is never valid here."


def _has_nul(items: Callable[[], Iterable[tuple[str, list[str]]]]) -> bool:
    return any(NUL in key or any(NUL in v for v in values) for key, values in items())


class RejectNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        where = self._nul_in(request)
        if where:
            message = MESSAGE.format(where=where)
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=400)
            return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return self.get_response(request)

    @staticmethod
    def _nul_in(request: HttpRequest) -> str:
        if NUL in request.path:
            return "path"
        if _has_nul(request.GET.lists):
            return "query string"
        form = request.content_type == "application/x-www-form-urlencoded"
        # API bodies are JSON or JSONL streamed by the view; they are never parsed as a form here.
        if form and not request.path.startswith("/api/") and _has_nul(request.POST.lists):
            return "form fields"
        return ""
