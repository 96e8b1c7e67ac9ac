"""Second chances from the run page: resume a run stopped for an infrastructure reason once the
cause is gone, and run a failed or cancelled run again as a new run (DESIGN.md section 6.12).

Both are POSTs with CSRF, checked against ``review.restart_run`` and the user's tenant scope,
calling ``runtime.decisions.second_chances`` as the signed-in user; the runtime traces who asked.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from review.permissions import Perm, require_perm
from review.scope import scope_run_check
from review.views.common import see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.decisions import second_chances


def _second_chance(request: HttpRequest, run_id: str, *, failed: str, unchanged: str,
                   act: Callable[[str], tuple[str | SafeString, str]]) -> HttpResponse:
    """Check the scope, call ``act(requested_by)`` and answer 303 with its ``(message, where)``;
    a refusal goes back to the run page with the runtime's reason.

    Raises:
        RunNotFoundError: no such run, or outside the user's scope (a 404; DESIGN.md section 6.6).
    """
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6, before any read
    page = reverse("review:run", args=[run_id])
    try:
        done, where = act(request.user.get_username())
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, Action(failed=failed, back=page, result=page, unchanged=unchanged))
    messages.success(request, done)
    return see_other(where)


@require_perm(Perm.RESTART_RUN)
@require_POST
@not_found_is_404
def run_resume(request: HttpRequest, run_id: str) -> HttpResponse:
    """Queue a run stopped for an infrastructure reason (``run_resume_request``); refused, with the
    cause named, while it is still there."""
    def act(requested_by: str) -> tuple[str, str]:
        stop = second_chances.run_resume_request(run_id=run_id, requested_by=requested_by)
        return (f"Resume requested: the cause ({stop.event}) is gone from here and the run is queued for a "
                "worker.", reverse("review:run", args=[run_id]))

    return _second_chance(request, run_id, failed=f"Could not resume run {run_id}", unchanged="nothing was queued",
                          act=act)


@require_perm(Perm.RESTART_RUN)
@require_POST
@not_found_is_404
def run_again(request: HttpRequest, run_id: str) -> HttpResponse:
    """Start a new run with the same spec as this failed or cancelled run (``run_again``) and go to it."""
    def act(requested_by: str) -> tuple[SafeString, str]:
        new_id = second_chances.run_again(run_id=run_id, requested_by=requested_by)
        return (format_html('Run <a href="{}">{}</a> started again as this run, with the same spec.',
                            reverse("review:run", args=[run_id]), run_id), reverse("review:run", args=[new_id]))

    return _second_chance(request, run_id, failed=f"Could not run {run_id} again", unchanged="no run was created",
                          act=act)
