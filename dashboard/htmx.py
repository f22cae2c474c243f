"""The one way a view answers htmx: `render_page`, with the template partial for the region.

A page with a region htmx swaps names that region's partial::

    return render_page(request, "servers/overview.html", ctx, partial="servers-region")

An htmx request that swaps a region gets `template#partial`; every other request gets the whole
page. A history-restore request (htmx asks again for a URL it pushed, after its cache missed) and a
boosted navigation are page loads too, or the browser would show a bare region after back/forward.

An endpoint only htmx calls (a polled status, a panel loaded after the page, a row after a post)
names the partial in the template name, and always answers it::

    return render_page(request, "alerts/list.html#alert-row", ctx)

A view that must know more asks django-htmx itself: `if request.htmx:` where a plain form post is
answered with a redirect instead, and `request.htmx.target` where a region needs less work than the
page (htmx sends no region target with a history restore).

Every answer carries ``Vary: HX-Request``, so no cache hands a region to a page load or back.
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


def _swaps_region(request: HtmxHttpRequest) -> bool:
    htmx = request.htmx
    return bool(htmx) and not htmx.history_restore_request and not htmx.boosted


def render_page(
    request: HtmxHttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    oob: tuple[str, ...] = (),
    stop_polling: bool = False,
    status: int = 200,
) -> HttpResponse:
    """Render `template`, or its `partial` when htmx swaps a region (see the module docstring).

    A region answer may carry more: `oob` names further partials of the same template, rendered
    after it with ``oob=True`` (the partial then marks its root ``hx-swap-oob="true"`` and htmx
    swaps it into the element with its id), so one answer refreshes every region a change touched;
    `stop_polling` answers 286, which tells a polling element the region has nothing left to wait
    for. A whole page carries neither.
    """
    if partial is not None and not _swaps_region(request):
        response = render(request, template, context, status=status)
    else:
        name = f"{template}#{partial}" if partial is not None else template
        page = name.split("#", 1)[0]
        parts = [render_to_string(name, context, request=request)]
        parts += [
            render_to_string(f"{page}#{extra}", {**context, "oob": True}, request=request) for extra in oob
        ]
        body = "\n".join(parts)
        response = HttpResponseStopPolling(body) if stop_polling else HttpResponse(body, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response
