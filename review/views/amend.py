"""The Amend page: edit a waiting write's arguments, see the amended diff, then approve (DESIGN.md section 6.13).

GET (``approval-amend``) shows the proposed arguments as editable JSON with the proposed action's
diff. A POST with ``step=preview`` recomputes the amended action, its intent digest and dry-run diff and changes
nothing (``amendment_preview``); a POST (to ``amend``) with ``step=confirm`` amends and approves in one runtime
call (``approval_amend``) bound to the intent and environment fingerprint the preview showed, and
redirects (303) to the run. Refusals (outside the policy, the action or environment moved) go back
to this page with the runtime's reason. Checked against the amend permission in the view, and
against the user's tenants before any read (DESIGN.md section 6.6).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST, require_safe

from review.forms_amend import AmendForm, arguments_text
from review.permissions import Perm, require_perm
from review.scope import scope_run_check
from review.views.common import see_other
from review.views.errors import ACTION_ERRORS, NOT_FOUND, Action, action_failed, not_found_is_404, refusal_message
from runtime.decisions import amendments as amend_service
from runtime.errors import RatchetError


def _page(run_id: str) -> str:
    return reverse("review:approval-amend", args=[run_id])


@require_perm(Perm.AMEND_ACTION)
@require_safe
@not_found_is_404
def approval_amend_page(request: HttpRequest, run_id: str) -> HttpResponse:
    """The Amend page of the write ``run_id`` waits for: its arguments as editable JSON and its
    dry-run diff as proposed; a run that is not waiting says so."""
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6, before any read
    context: dict[str, Any] = {"run_id": run_id}
    try:
        # One preview of the proposed arguments (restored and checked once): it carries the
        # proposed action, its intent digest and the arguments as well as the diff.
        preview = amend_service.amendment_preview(run_id=run_id)
        context.update(proposed_intent_digest=preview.proposed_intent_digest, proposed=preview.proposed,
                       arguments=arguments_text(preview.arguments), preview=preview)
    except RatchetError as exc:
        if isinstance(exc, tuple(NOT_FOUND)):
            raise
        context["refusal"] = refusal_message(exc, failed=f"Run {run_id} cannot be amended now")
    return render(request, "review/approval_amend.html", context)


@require_perm(Perm.AMEND_ACTION)
@require_POST
@not_found_is_404
def approval_amend(request: HttpRequest, run_id: str) -> HttpResponse:
    """Preview (``step=preview``: the amended diff, nothing changed) or confirm (``step=confirm``:
    ``approval_amend``, 303 to the run) an amendment of the write ``run_id`` waits for."""
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6, before any read
    return _post(request, run_id)


def _preview(request: HttpRequest, run_id: str, data: dict, action: Action) -> HttpResponse:
    """The amended action's dry-run diff, nothing changed."""
    try:
        preview = amend_service.amendment_preview(run_id=run_id, arguments=data["arguments"])
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, action)
    return render(request, "review/approval_amend.html", {
        "run_id": run_id, "proposed_intent_digest": data["proposed_intent_digest"], "proposed": preview.proposed,
        "arguments": arguments_text(data["arguments"]), "preview": preview, "previewed": True,
        "note": data.get("note") or ""})


def _post(request: HttpRequest, run_id: str) -> HttpResponse:
    action = Action(failed=f"Could not amend run {run_id}", back=_page(run_id),
                    result=reverse("review:run", args=[run_id]), unchanged="nothing was amended or approved")
    form = AmendForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(str(e) for field in form.errors.values() for e in field)
        messages.error(request, f"The amendment was not sent: {errors}. Nothing was changed.")
        return see_other(action.back)
    data = form.cleaned_data
    if data["step"] == "preview":
        return _preview(request, run_id, data, action)
    try:
        outcome = amend_service.approval_amend(
            run_id=run_id, approver=request.user.get_username(), arguments=data["arguments"],
            proposed_intent_digest=data["proposed_intent_digest"],
            environment_fingerprint=data["environment_fingerprint"], note=data.get("note") or "",
            may_refresh=request.user.has_perm(Perm.REFRESH_APPROVAL.value))
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, action)
    if outcome.outcome == "reconciled":
        messages.warning(request, "The original write had already committed before a crash: its receipt was "
                                  "reconciled and nothing was amended.")
    else:
        messages.success(request, format_html(
            "Amended and approved by {}: the run will execute the amended action (intent {}), not the one "
            "proposed. It is now <strong>{}</strong>.", request.user.get_username(),
            (outcome.amended_intent_digest or "")[:19], outcome.phase))
    return see_other(action.result)

