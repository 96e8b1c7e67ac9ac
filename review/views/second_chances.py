"""Second chances from the run page: resume a run stopped for an infrastructure reason once the
cause is gone, and run a failed or cancelled run again as a new run (DESIGN.md section 6.12).

Both are POSTs with CSRF, checked against ``review.restart_run`` and the user's tenant scope,
calling ``runtime.decisions.second_chances`` as the signed-in user; the runtime traces who asked.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from review.permissions import Perm, require_perm
from review.queries.runs import run_get
from review.views.common import see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.decisions import second_chances


@require_perm(Perm.RESTART_RUN)
@require_POST
@not_found_is_404
def run_resume(request: HttpRequest, run_id: str) -> HttpResponse:
    """Queue a run stopped for an infrastructure reason (``run_resume_request``); refused, with the
    cause named, while it is still there."""
    run_get(run_id=run_id, user=request.user)  # 404 outside the user's scope (DESIGN.md section 6.6)
    page = reverse("review:run", args=[run_id])
    try:
        stop = second_chances.run_resume_request(run_id=run_id, requested_by=request.user.get_username())
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, Action(failed=f"Could not resume run {run_id}", back=page, result=page,
                                                  unchanged="nothing was queued"))
    messages.success(request, f"Resume requested: the cause ({stop.event}) is gone from here and the run is "
                              "queued for a worker.")
    return see_other(page)


@require_perm(Perm.RESTART_RUN)
@require_POST
@not_found_is_404
def run_again(request: HttpRequest, run_id: str) -> HttpResponse:
    """Start a new run with the same spec as this failed or cancelled run (``run_again``) and go to it."""
    run_get(run_id=run_id, user=request.user)  # 404 outside the user's scope (DESIGN.md section 6.6)
    page = reverse("review:run", args=[run_id])
    try:
        new_id = second_chances.run_again(run_id=run_id, requested_by=request.user.get_username())
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, Action(failed=f"Could not run {run_id} again", back=page, result=page,
                                                  unchanged="no run was created"))
    messages.success(request, format_html('Run <a href="{}">{}</a> started again as this run, with the same spec.',
                                          page, run_id))
    return see_other(reverse("review:run", args=[new_id]))
