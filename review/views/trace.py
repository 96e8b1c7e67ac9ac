"""The trace evidence browser across runs (admin): a partial run id, content search, event type
and environment version, newest events first in keyset pages (DESIGN.md sections 6.6, 6.8)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from review.filters import TraceFilterForm, query_parse
from review.permissions import Perm, require_perm
from review.queries.trace import trace_event_types, trace_search
from review.views.common import fragment_requested, page_render


@require_perm(Perm.VIEW_TRACE)
@require_safe
def trace_browser(request: HttpRequest) -> HttpResponse:
    """Trace evidence across runs, filtered by a partial run id, content search, event type and
    environment version (admin). A bad filter value is a form error (``400`` for a whole page)."""
    parsed = query_parse(TraceFilterForm, request.GET)
    result = None
    if parsed.valid:
        result = trace_search(user=request.user, filters=parsed.filters, before=parsed.cursor,
                              verify=request.GET.get("verify") == "chain")
    context = {"form": parsed.form, "filters": parsed.filters, "result": result}
    if not fragment_requested(request):
        context["event_types"] = trace_event_types()
    return page_render(request, "review/trace.html", context, fragment="events", status=parsed.status)
