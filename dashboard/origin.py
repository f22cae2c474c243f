"""The address the current web request came in on, for links in notifications when `SITE_URL` is unset.

`RequestOriginMiddleware` keeps `scheme://host[:port]` of each request in a context variable; an
alert opened while serving that request (a budget edit, a pushed ingest) stores it, and its
notifications link there. Work done outside a request (a scheduled poll on a worker) has no
origin: then `SITE_URL` decides, else the address of the embedded run on the same VAR_DIR (a
command run beside `make run`), else `DEFAULT_SITE_URL`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

DEFAULT_SITE_URL = "http://127.0.0.1:8000"
_origin: ContextVar[str] = ContextVar("request_origin", default="")


def current_origin() -> str:
    return _origin.get()


def site_url(origin: str = "") -> str:
    """The base for absolute links: `SITE_URL`, else the given request origin, else the address
    the embedded run on this VAR_DIR serves on, else the default."""
    return (settings.SITE_URL or origin or embedded_site_url() or DEFAULT_SITE_URL).rstrip("/")


def _embedded_site_url_file() -> Path:
    return Path(settings.VAR_DIR) / "run" / "site_url"


def embedded_site_url() -> str:
    """The address `run_embedded` serves on, while it runs: a command run beside it (`manage.py
    poll`, `ingest`, ...) has no SITE_URL of its own, and its links must open the running app."""
    try:
        return _embedded_site_url_file().read_text().strip()
    except OSError:
        return ""


def record_embedded_site_url(url: str | None) -> None:
    """Written by `run_embedded` when it starts (None: removed when it stops)."""
    path = _embedded_site_url_file()
    if url is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(url + "\n")


class RequestOriginMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            origin = f"{request.scheme}://{request.get_host()}"
        except DisallowedHost:
            origin = ""  # CommonMiddleware answers 400 for it
        token = _origin.set(origin)
        try:
            return self.get_response(request)
        finally:
            _origin.reset(token)
