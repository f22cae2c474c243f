"""The one place that decides between a whole page and an htmx fragment.

Every view that serves both renders through `render_page`. It answers a fragment only to an htmx
request that swaps part of the page; a history-restore request (htmx asks for the URL it pushed
when its cache missed) and a boosted navigation get the whole page, or the browser would show a
bare fragment after back/forward. Both kinds of answer carry ``Vary: HX-Request`` so no cache
hands one to the other.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.cache import patch_vary_headers
from django_htmx.http import HttpResponseStopPolling
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An `HttpRequest` after django-htmx's middleware: views type their request with this."""

    htmx: HtmxDetails


def wants_fragment(request: HtmxHttpRequest) -> bool:
    """True for an htmx request that swaps a region; False for a full page load of any kind."""
    htmx = request.htmx
    return bool(htmx) and not htmx.history_restore_request and not htmx.boosted


def fragment_target(request: HtmxHttpRequest) -> str | None:
    """The id of the element an htmx fragment request swaps, or None for a full page."""
    return request.htmx.target if wants_fragment(request) else None


def render_page(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    fragment: str | None = None,
    stop_polling: bool = False,
    status: int = 200,
) -> HttpResponse:
    """Render `template`, or its named partial `template#fragment` when htmx swaps a region.

    `stop_polling` answers the fragment with 286, which tells a polling element to stop: the region
    has nothing left to wait for.
    """
    if fragment and wants_fragment(request):
        name = f"{template}#{fragment}"
        if stop_polling:
            response: HttpResponse = HttpResponseStopPolling(render_to_string(name, context, request=request))
        else:
            response = render(request, name, context, status=status)
    else:
        response = render(request, template, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def render_fragment(
    request: HtmxHttpRequest, template: str, context: dict[str, Any], *, stop_polling: bool = False
) -> HttpResponse:
    """A region that only htmx asks for (e.g. a status badge polled while work runs)."""
    if stop_polling:
        response: HttpResponse = HttpResponseStopPolling(render_to_string(template, context, request=request))
    else:
        response = render(request, template, context)
    patch_vary_headers(response, ("HX-Request",))
    return response


def render_with_oob(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    fragment: str,
    oob: tuple[str, ...] = (),
    *,
    stop_polling: bool = False,
) -> HttpResponse:
    """The region htmx asked for (`template#fragment`) and, after it, each named partial in `oob`
    rendered with ``oob=True``: a partial marks its root ``hx-swap-oob="true"`` then, and htmx
    swaps it into the element with its id. One answer so refreshes every region a change touched,
    instead of each region asking again (and some never asking)."""
    parts = [render_to_string(f"{template}#{fragment}", context, request=request)]
    parts += [
        render_to_string(f"{template}#{name}", {**context, "oob": True}, request=request) for name in oob
    ]
    body = "\n".join(parts)
    response: HttpResponse = HttpResponseStopPolling(body) if stop_polling else HttpResponse(body)
    patch_vary_headers(response, ("HX-Request",))
    return response
