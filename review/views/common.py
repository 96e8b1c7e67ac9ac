"""What every dashboard view shares: telling an htmx swap from a page request, rendering a page
or one of its partials, the poller's context of a live page, and the 303 after a POST."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from review.queries.live import POLL_SECONDS as LIVE_POLL_SECONDS


def fragment_requested(request: HttpRequest) -> bool:
    """An htmx swap (not a history restore, which needs the whole page)."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def polled(request: HttpRequest) -> bool:
    """A live page's poll: an htmx request carrying the ``since`` token of what it shows."""
    return fragment_requested(request) and "since" in request.GET


def page_render(request: HttpRequest, template: str, context: dict[str, Any], *,
                fragment: str | None = None, status: int = 200) -> HttpResponse:
    """``template`` as a whole page, or only its ``fragment`` partial for an htmx swap.

    A fragment answers 200 even when the page would answer ``status`` (a refused filter):
    htmx swaps only 2xx answers, and the swapped fragment shows the error.
    """
    if fragment is not None and fragment_requested(request):
        return render(request, f"{template}#{fragment}", context)
    return render(request, template, context, status=status)


def poll_context(request: HttpRequest, *, token: str) -> dict[str, Any] | None:
    """The poller's context for a live page showing ``token`` (DESIGN.md section 6.8), or
    ``None`` when this is a poll whose ``since`` equals ``token`` (answer 204: nothing changed).

    ``announce`` is True for a poll that must re-render the page's regions out of band.
    """
    is_poll = polled(request)
    if is_poll and request.GET["since"] == token:
        return None
    return {
        "token": token,
        "polling": True,
        "poll_url": request.path + _query_without_since(request),
        "poll_seconds": LIVE_POLL_SECONDS,
        "announce": is_poll,
    }


def _query_without_since(request: HttpRequest) -> str:
    query = request.GET.copy()
    query.pop("since", None)
    query.pop("verify", None)  # a poll never re-hashes a whole trace
    return f"?{query.urlencode()}" if query else ""


def see_other(url: str) -> HttpResponseRedirect:
    """A 303 to ``url``: after a POST the browser must GET the next page (post/redirect/get)."""
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response
