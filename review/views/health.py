"""The fleet pages: rollout health (metrics from the counters, charts, run counts) and the live
workers with their queues (DESIGN.md section 8.1)."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from review.notifications.outbox import outbox_health
from review.permissions import Perm, require_perm
from review.queries.health import DEFAULT_RANGE, RANGES, health_summary_cached
from review.queries.live import nav_counts
from review.queries.workers import workers_view
from review.scope import scope_sees_all


@require_perm(Perm.VIEW_RUNS)
@require_safe
def health(request: HttpRequest) -> HttpResponse:
    """Rollout metrics from the counters, charts over ``?range=24h|7d``, run counts and whether
    notifications are getting out (DESIGN.md section 6.10; the newest delivery error, which may
    name another tenant's target, only for users who see every tenant)."""
    range_name = request.GET.get("range", DEFAULT_RANGE)
    summary = health_summary_cached(range_name=range_name, user=request.user)
    return render(request, "review/health.html", {
        "health": summary, "nav": nav_counts(user=request.user),
        "ranges": list(RANGES), "range": summary.series.range_name,
        "chart_json": json.dumps(summary.series.as_json(), separators=(",", ":")),
        "can_view_workers": request.user.has_perm(Perm.CANCEL_RUN.value),
        "outbox": outbox_health(), "outbox_detail": scope_sees_all(user=request.user),
    })


@require_perm(Perm.CANCEL_RUN)
@require_safe
def workers(request: HttpRequest) -> HttpResponse:
    """Live workers, the queues they consume and queue depths (operators: it names machines)."""
    return render(request, "review/workers.html",
                  {"view": workers_view(user=request.user), "nav": nav_counts(user=request.user)})
