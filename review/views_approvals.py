"""Approvals queue and the operator's actions: approve, refresh an expired approval, deny, cancel.

Each action is a POST with CSRF (the middleware refuses it without the token before the view
runs), checked against its own permission in the view, and calls one runtime service with the
signed-in user as the approver (``runtime.decisions.approvals``, ``runtime.decisions.cancellation.run_request_cancel``).
The dashboard never changes runtime rows itself. After the call the browser is redirected
(303, post/redirect/get) with the outcome as a message: the run page on success, the queue on a
refusal, with the runtime's reason.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST, require_safe
from kombu.exceptions import OperationalError as BrokerUnavailableError

from review.forms import ApprovalForm, ApprovalsFilterForm, DenyForm
from review.permissions import Perm, require_perm
from review.queries.approvals import approvals_queue
from review.queries.live import approvals_token, nav_counts
from review.queries.runs import CANCELLABLE_PHASES, run_get
from review.scope import scope_run_check, scope_sees_all
from review.views import fragment_requested, poll_context
from runtime.decisions import approvals as approval_service
from runtime.decisions import cancellation as cancel_service
from runtime.errors import (
    ApprovalRefusedError,
    LeaseError,
    LeaseHeldError,
    RatchetError,
    RunNotFoundError,
    StaleGenerationError,
)

BUSY = (
    "Someone else is changing this run right now (a worker, another operator, or you in another "
    "tab or window), so nothing was changed. Reload in a few seconds to see the current state."
)
TAKEN_OVER = (
    "Another session changed this run at the same moment (possibly you, in another tab or "
    "window), so nothing from this attempt was applied. The run page shows what the other "
    "session did."
)
QUEUE_DOWN = (
    "The run's new state is saved, but the worker queue could not be reached; the sweeper "
    "re-queues the run within its next period."
)


def _see_other(url: str) -> HttpResponseRedirect:
    response = HttpResponseRedirect(url)
    response.status_code = 303  # after a POST the browser must GET the next page
    return response


def _queue_url(run_id: str | None = None) -> str:
    url = reverse("review:approvals")
    return f"{url}?run={run_id}" if run_id else url


@require_perm(Perm.APPROVE_ACTION)
@require_safe
def approvals(request: HttpRequest) -> HttpResponse:
    """The approvals queue: each waiting action with its risk, dry-run diff, environment version
    and fingerprint and approval state, and the Approve / Refresh / Deny forms the user may use.

    Paginated (``APPROVALS_PER_PAGE``); ``?run=ID`` shows one run. An htmx request for the
    ``#approvals`` target gets only the queue.
    """
    counts = nav_counts(user=request.user)
    token = approvals_token(counts, user=request.user)
    live = poll_context(request, token=token)
    if live is None:
        return HttpResponse(status=204)
    form = ApprovalsFilterForm(request.GET)
    queue = approvals_queue(user=request.user, run=form.run_id(),
                            page_number=request.GET.get("page"))
    context = {
        **live,
        "nav": counts,
        "form": form,
        "queue": queue,
        "can_approve": request.user.has_perm(Perm.APPROVE_ACTION.value),
        "can_refresh": request.user.has_perm(Perm.REFRESH_APPROVAL.value),
        "can_deny": request.user.has_perm(Perm.DENY_ACTION.value),
        "scoped": not scope_sees_all(user=request.user),  # attachment links carry ?run=
    }
    if live["announce"]:
        waiting = counts.approvals_label
        context["announce"] = f"Approvals queue updated: {waiting} waiting."
        return render(request, "review/approvals.html#live", context)
    if fragment_requested(request):
        return render(request, "review/approvals.html#approvals", context)
    return render(request, "review/approvals.html", context)


def _in_scope(request: HttpRequest, run_id: str) -> None:
    """404 for a run outside the user's tenants, exactly as for one that does not exist
    (DESIGN.md section 6.6), before anything about the run is read or said."""
    try:
        scope_run_check(user=request.user, run_id=run_id)
    except RunNotFoundError:
        raise Http404("no such run") from None


def _grant(request: HttpRequest, run_id: str, *, refresh: bool) -> HttpResponse:
    _in_scope(request, run_id)
    form = ApprovalForm(request.POST)
    if not form.is_valid():
        messages.error(request, form.errors["environment_fingerprint"][0])
        return _see_other(_queue_url(run_id))
    call = approval_service.approval_refresh if refresh else approval_service.approval_grant
    verb = "refresh" if refresh else "approve"
    if not refresh and _has_approval(run_id) and not request.user.has_perm(
        Perm.REFRESH_APPROVAL.value
    ):
        # approval_grant over existing (expired) evidence replaces it: that is a refresh, and
        # Approve must not be a way around the refresh permission (DESIGN.md section 6.6).
        messages.error(
            request,
            f"Run {run_id} already has an approval (it has expired); replacing it is a refresh, "
            "which your account may not do. Ask an operator with the refresh permission. "
            "Nothing was changed.",
        )
        return _see_other(_queue_url(run_id))
    try:
        outcome = call(
            run_id=run_id,
            approver=request.user.get_username(),
            environment_fingerprint=form.cleaned_data["environment_fingerprint"],
        )
    except RunNotFoundError:
        raise Http404("no such run") from None
    except ApprovalRefusedError as exc:
        messages.error(
            request, f"Could not {verb} run {run_id}: {exc.message}. Nothing was changed."
        )
        return _see_other(_queue_url(run_id))
    except LeaseHeldError:
        messages.warning(request, BUSY)
        return _see_other(_queue_url(run_id))
    except (LeaseError, StaleGenerationError):
        # Sessions of one approver share the service's lease holder name, so a second tab
        # takes the lease over instead of waiting; the first then loses it at commit.
        messages.warning(request, TAKEN_OVER)
        return _see_other(reverse("review:run", args=[run_id]))
    except BrokerUnavailableError:
        messages.warning(request, QUEUE_DOWN)
        return _see_other(reverse("review:run", args=[run_id]))
    except RatchetError as exc:
        messages.error(request, f"Could not {verb} run {run_id}: {exc}")
        return _see_other(_queue_url(run_id))
    if outcome.outcome == "reconciled":
        messages.success(
            request,
            "The write had already committed before a crash: its receipt was reconciled and it "
            "will not run again.",
        )
    else:
        until = outcome.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC") if outcome.expires_at else "?"
        messages.success(
            request,
            format_html(
                "Approval {} by {} (valid until {}). The run is queued for a worker: it is now "
                "<strong>{}</strong>.",
                outcome.outcome,
                request.user.get_username(),
                until,
                outcome.phase,
            ),
        )
    return _see_other(reverse("review:run", args=[run_id]))


def _has_approval(run_id: str) -> bool:
    """Whether the run's pending write already carries approval evidence (valid or expired)."""
    try:
        waiting = approval_service.approvals_waiting(run_ids=[run_id])
    except RatchetError:
        return False  # the service itself refuses below, with its reason
    return any(w.approval_state != "none" for w in waiting)


@require_perm(Perm.APPROVE_ACTION)
@require_POST
def approval_approve(request: HttpRequest, run_id: str) -> HttpResponse:
    """Approve the write ``run_id`` waits for (``runtime.decisions.approvals.approval_grant``), bound to
    the environment fingerprint the page showed; 303 to the run, or back to the queue with the
    runtime's refusal."""
    return _grant(request, run_id, refresh=False)


@require_perm(Perm.REFRESH_APPROVAL)
@require_POST
def approval_refresh(request: HttpRequest, run_id: str) -> HttpResponse:
    """Refresh an expired approval (``approval_refresh``): fresh evidence bound to the current
    environment; the old evidence is sealed into the trace (DESIGN.md section 6)."""
    return _grant(request, run_id, refresh=True)


@require_perm(Perm.DENY_ACTION)
@require_POST
def approval_deny(request: HttpRequest, run_id: str) -> HttpResponse:
    """Deny the pending write with a reason (``approval_deny``): it never runs and the run ends
    failed; if it had already committed, the runtime reconciles it and refuses the denial."""
    _in_scope(request, run_id)
    form = DenyForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, "A denial needs a reason (at most 500 characters). Nothing was changed."
        )
        return _see_other(_queue_url(run_id))
    try:
        outcome = approval_service.approval_deny(
            run_id=run_id, approver=request.user.get_username(), reason=form.cleaned_data["reason"]
        )
    except RunNotFoundError:
        raise Http404("no such run") from None
    except ApprovalRefusedError as exc:
        messages.error(request, f"Could not deny run {run_id}: {exc.message}.")
        return _see_other(_queue_url(run_id))
    except LeaseHeldError:
        messages.warning(request, BUSY)
        return _see_other(_queue_url(run_id))
    except (LeaseError, StaleGenerationError):
        messages.warning(request, TAKEN_OVER)
        return _see_other(reverse("review:run", args=[run_id]))
    except RatchetError as exc:
        messages.error(request, f"Could not deny run {run_id}: {exc}")
        return _see_other(_queue_url(run_id))
    messages.success(
        request,
        format_html(
            "Denied: the write will not run and the run is now <strong>{}</strong>.", outcome.phase
        ),
    )
    return _see_other(reverse("review:run", args=[run_id]))


@require_perm(Perm.CANCEL_RUN)
@require_POST
def run_cancel(request: HttpRequest, run_id: str) -> HttpResponse:
    """Stop a run (``runtime.decisions.cancellation.run_request_cancel``). A live run is stopped by the worker
    driving it, which settles any pending write by its receipt first; a run frozen for an approval
    or a review is cancelled at once, keeping its evidence."""
    try:
        run = run_get(run_id=run_id, user=request.user)
    except RunNotFoundError:
        raise Http404("no such run") from None
    if run.phase not in CANCELLABLE_PHASES:
        messages.error(request, f"Run {run_id} is {run.phase}: there is nothing to cancel.")
        return _see_other(reverse("review:run", args=[run_id]))
    try:
        phase = cancel_service.run_request_cancel(run_id=run_id, requested_by=request.user.get_username())
    except RunNotFoundError:
        raise Http404("no such run") from None
    except LeaseHeldError:
        messages.error(request, "Someone is changing this run right now; try again in a few seconds.")
        return _see_other(reverse("review:run", args=[run_id]))
    if phase == "cancelled":
        messages.success(request, "Run cancelled. Its pending write and evidence are kept in the checkpoint.")
    else:
        messages.success(
            request,
            "Cancellation requested. The worker settles any pending write by its receipt, then stops "
            "the run.",
        )
    return _see_other(reverse("review:run", args=[run_id]))
