"""Approvals queue and the operator's actions: approve, refresh an expired approval, deny.

Each action is a POST with CSRF (the middleware refuses it without the token before the view
runs), checked against its own permission in the view, and calls one runtime service
(``runtime.decisions.approvals``) with the signed-in user as the approver; the dashboard never
changes runtime rows itself. Who may replace existing evidence is the service's rule
(``may_refresh``, DESIGN.md section 6.6): the view passes the user's refresh permission and the
service decides on the checkpoint it restored once for the grant. After the call the browser
is redirected (303, post/redirect/get) with the outcome as a message: the run page on success,
the queue on a refusal, with the runtime's reason (``review.views.errors``).
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST, require_safe

from review.forms import DENY_MODES, ApprovalForm, ApprovalsFilterForm, DenyForm
from review.permissions import Perm, require_perm
from review.queries.approvals import approvals_queue
from review.queries.live import approvals_token, nav_counts
from review.scope import scope_run_check, scope_sees_all
from review.views.common import page_render, poll_context, see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.core.denial_evidence import DenyMode
from runtime.decisions import approvals as approval_service
from runtime.decisions import denials as denial_service
from runtime.decisions.approvals import ApprovalOutcome


def _queue_url(run_id: str | None = None) -> str:
    url = reverse("review:approvals")
    return f"{url}?run={run_id}" if run_id else url


def _action(verb: str, run_id: str, *, unchanged: str = "nothing was changed") -> Action:
    return Action(failed=f"Could not {verb} run {run_id}", back=_queue_url(run_id),
                  result=reverse("review:run", args=[run_id]), unchanged=unchanged)


@require_perm(Perm.APPROVE_ACTION)
@require_safe
def approvals(request: HttpRequest) -> HttpResponse:
    """The approvals queue: each waiting action with its risk, dry-run diff, environment version
    and fingerprint and approval state, and the Approve / Refresh / Deny forms the user may use.

    Paginated (``APPROVALS_PER_PAGE``); ``?run=ID`` shows one run. An htmx request for the
    ``#approvals`` target gets only the queue.
    """
    counts = nav_counts(user=request.user)
    live = poll_context(request, token=approvals_token(counts, user=request.user))
    if live is None:
        return HttpResponse(status=204)
    form = ApprovalsFilterForm(request.GET)
    user = request.user
    context = {
        **live, "nav": counts, "form": form,
        "queue": approvals_queue(user=user, run=form.run_id(), page_number=request.GET.get("page")),
        "can_approve": user.has_perm(Perm.APPROVE_ACTION.value),
        "can_refresh": user.has_perm(Perm.REFRESH_APPROVAL.value),
        "can_deny": user.has_perm(Perm.DENY_ACTION.value),
        "can_amend": user.has_perm(Perm.AMEND_ACTION.value),
        "scoped": not scope_sees_all(user=user),  # attachment links carry ?run=
        "deny_modes": DENY_MODES, "deny_stop": DenyMode.STOP.value,
    }
    if live["announce"]:
        context["announce"] = f"Approvals queue updated: {counts.approvals_label} waiting."
        return page_render(request, "review/approvals.html", context, fragment="live")
    return page_render(request, "review/approvals.html", context, fragment="approvals")


def _grant(request: HttpRequest, run_id: str, *, refresh: bool) -> HttpResponse:
    """Approve or refresh: one service call, which restores the run once and decides there
    whether this user may replace existing evidence (``may_refresh``)."""
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6, before any read
    action = _action("refresh" if refresh else "approve", run_id)
    form = ApprovalForm(request.POST)
    if not form.is_valid():
        messages.error(request, next(iter(form.errors.values()))[0])
        return see_other(action.back)
    call = approval_service.approval_refresh if refresh else approval_service.approval_grant
    rule = {} if refresh else {"may_refresh": request.user.has_perm(Perm.REFRESH_APPROVAL.value),
                               "comment": form.cleaned_data.get("comment") or None,
                               "intent_digest": form.cleaned_data.get("intent_digest") or None}
    try:
        outcome = call(run_id=run_id, approver=request.user.get_username(),
                       environment_fingerprint=form.cleaned_data["environment_fingerprint"], **rule)
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, action)
    messages.success(request, _granted_message(outcome, approver=request.user.get_username()))
    return see_other(action.result)


def _granted_message(outcome: ApprovalOutcome, *, approver: str) -> str | SafeString:
    if outcome.outcome == "reconciled":
        return ("The write had already committed before a crash: its receipt was reconciled and "
                "it will not run again.")
    until = outcome.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC") if outcome.expires_at else "?"
    return format_html("Approval {} by {} (valid until {}). The run is queued for a worker: it "
                       "is now <strong>{}</strong>.", outcome.outcome, approver, until, outcome.phase)


@require_perm(Perm.APPROVE_ACTION)
@require_POST
@not_found_is_404
def approval_approve(request: HttpRequest, run_id: str) -> HttpResponse:
    """Approve the write ``run_id`` waits for (``approval_grant``), bound to the environment
    fingerprint and the intent digest the page showed; 303 to the run, or back to the queue with the runtime's
    refusal. Over existing (expired) evidence this is a refresh, refused by the service unless
    the user also holds the refresh permission (DESIGN.md section 6.6)."""
    return _grant(request, run_id, refresh=False)


@require_perm(Perm.REFRESH_APPROVAL)
@require_POST
@not_found_is_404
def approval_refresh(request: HttpRequest, run_id: str) -> HttpResponse:
    """Refresh an expired approval (``approval_refresh``): fresh evidence bound to the current
    environment; the old evidence is sealed into the trace (DESIGN.md section 6)."""
    return _grant(request, run_id, refresh=True)


@require_perm(Perm.DENY_ACTION)
@require_POST
@not_found_is_404
def approval_deny(request: HttpRequest, run_id: str) -> HttpResponse:
    """Deny the pending write with a reason (``approval_deny``): it never runs; the run ends
    failed, or with mode ``continue`` the reason is the write's outcome for the planner and the
    run goes on (DESIGN.md section 6.14). Bound to the fingerprint and intent digest the page
    showed; if the write had already committed, the runtime reconciles it and refuses the denial."""
    scope_run_check(user=request.user, run_id=run_id)  # DESIGN.md section 6.6, before any read
    action = _action("deny", run_id, unchanged="nothing was denied")
    form = DenyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "A denial needs a reason (at most 500 characters). Nothing was changed.")
        return see_other(action.back)
    data = form.cleaned_data
    try:
        outcome = denial_service.approval_deny(
            run_id=run_id, approver=request.user.get_username(), reason=data["reason"], mode=form.deny_mode(),
            environment_fingerprint=data.get("environment_fingerprint") or None,
            intent_digest=data.get("intent_digest") or None)
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, action)
    told = " The agent is told your reason and plans something else." if form.deny_mode() == DenyMode.CONTINUE else ""
    messages.success(request, format_html(
        "Denied: the write will not run and the run is now <strong>{}</strong>.{}", outcome.phase, told))
    return see_other(action.result)
