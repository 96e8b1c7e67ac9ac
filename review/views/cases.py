"""Review cases: the list, one case with its evidence, and the reviewer's signed decision.

A case page shows the pending intent beside the conflicting receipt (differing fields
highlighted), the fingerprints, the trace excerpt kept with the case, and the exact binding a
decision will be signed over (``runtime.decisions.reviews.decision_prepare``). Deciding is a POST with
CSRF and the reviewer's password re-entered; the view signs *the binding the page showed*
(``decision_sign_for``) as the signed-in user and hands it to ``case_decide``, which holds the
run's lease under a name of this call alone (``reviewer:<user>:<random>``). If the run or its
environment changed between viewing and signing, the runtime refuses the decision, keeps the run
frozen and records the refusal in the trace; the page says so (DESIGN.md section 6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST, require_safe
from pydantic import ValidationError

from review.forms import CaseFilterForm, DecisionForm, binding_token
from review.passkeys import passkey_list
from review.permissions import Perm, require_perm
from review.queries.cases import case_counts, case_get, case_list
from review.queries.conflict_evidence import conflict_evidence
from review.queries.live import cases_token, nav_counts
from review.scope import scope_case_check
from review.stepup import stepup_locked, stepup_password_check
from review.views.common import fragment_requested, page_render, poll_context, see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.core.checkpoint import SignedDecision
from runtime.decisions import reviews as review_service
from runtime.decisions.reviews import DecisionOutcome


@require_perm(Perm.DECIDE_CASE)
@require_safe
def cases(request: HttpRequest) -> HttpResponse:
    """Review cases, open ones first; filter by status; paginated (``CASES_PER_PAGE``)."""
    form = CaseFilterForm(request.GET)
    counts = nav_counts(user=request.user)
    live = poll_context(request, token=cases_token(counts, user=request.user, status=form.status_value()))
    if live is None:
        return HttpResponse(status=204)
    context = {
        **live, "nav": counts, "form": form,
        "page": case_list(user=request.user, status=form.status_value(), page_number=request.GET.get("page")),
    }
    if live["announce"]:
        context["announce"] = f"Review cases updated: {counts.cases_label} open."
        return page_render(request, "review/cases.html", context, fragment="live")
    if not fragment_requested(request):
        context["counts"] = case_counts(user=request.user)
    return page_render(request, "review/cases.html", context, fragment="cases-table")


def _case_page(request: HttpRequest, case_id: str, *, form: DecisionForm | None = None,
               status: int = 200, lockout: Any = None) -> HttpResponse:
    """The case page; ``form`` re-shown with its errors after a failed attempt.

    Raises:
        ReviewCaseNotFoundError: no such case, or outside the user's scope (a 404).
    """
    scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
    detail = case_get(case_id=case_id)
    # The hidden binding is always the one on the page now, even when the form is re-shown after
    # a failed attempt: what the reviewer reads is what gets signed.
    response = render(request, "review/case_detail.html", {
        "detail": detail, "case": detail.case, "evidence": conflict_evidence(case=detail.case),
        "form": form or DecisionForm(case_id=case_id), "lockout": lockout,
        "binding_token": binding_token(case_id=case_id, binding=detail.binding) if detail.binding else "",
        "can_decide": detail.binding is not None,
        "password_fallback": settings.RATCHET_REVIEW_PASSWORD_FALLBACK,
        "passkeys": passkey_list(reviewer=request.user.get_username()),
    }, status=status)
    if lockout is not None:
        response["Retry-After"] = str(lockout.retry_after_seconds)
    return response


@require_perm(Perm.DECIDE_CASE)
@require_safe
@not_found_is_404
def case_detail(request: HttpRequest, case_id: str) -> HttpResponse:
    """One case: intent vs receipt, fingerprints, trace excerpt, the binding to sign and, while
    it is open, the decision form (replan or abort, password re-entry)."""
    return _case_page(request, case_id)


@require_perm(Perm.DECIDE_CASE)
@require_POST
@sensitive_post_parameters("password")
@not_found_is_404
def case_decide(request: HttpRequest, case_id: str) -> HttpResponse:
    """Sign the shown binding as the signed-in reviewer and apply it (``case_decide``).

    Answers 400 for an invalid form or a wrong password (counted like a failed sign-in, so the
    password prompt cannot be used to guess it; 429 while locked), otherwise 303 to the case page
    with the outcome: applied, or refused with the runtime's reason and the run still frozen.
    """
    scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
    if not settings.RATCHET_REVIEW_PASSWORD_FALLBACK:
        messages.error(request, "Signing with a password is turned off here "
                                "(RATCHET_REVIEW_PASSWORD_FALLBACK=0): sign with your passkey. Nothing was signed.")
        return see_other(reverse("review:case", args=[case_id]))
    form = DecisionForm(request.POST, case_id=case_id)
    refused = _password_refused(request, case_id, form)
    if refused is not None:
        return refused
    return decision_apply(request, case_id, form=form, sign=lambda: review_service.decision_sign_for(
        case_id=case_id, reviewer=request.user.get_username(),
        decision=form.cleaned_data["decision"], binding=form.cleaned_data["binding"]))


def _password_refused(request: HttpRequest, case_id: str, form: DecisionForm) -> HttpResponse | None:
    """The case page re-shown (400, or 429 while locked) unless the form is valid and the
    password is the signed-in reviewer's; a wrong one counts like a failed sign-in, on the
    counter the sign-in page would use for this browser (``review.stepup``)."""
    lockout = stepup_locked(request=request)
    if lockout is not None:
        return _case_page(request, case_id, form=form, status=429, lockout=lockout)
    if not form.is_valid():
        return _case_page(request, case_id, form=form, status=400)
    ok, lockout = stepup_password_check(request=request, password=form.cleaned_data["password"])
    if not ok:
        form.add_error("password", "That is not your password. Nothing was signed.")
        return _case_page(request, case_id, form=form, status=429 if lockout else 400, lockout=lockout)
    return None


def decision_apply(request: HttpRequest, case_id: str, *, sign: Callable[[], SignedDecision],
                   form: DecisionForm | None = None) -> HttpResponse:
    """Sign (``sign()``) and apply a decision as the signed-in reviewer; answer 303 to the case
    page with the outcome as a message (the password form and the passkey ceremony share it;
    DESIGN.md section 6.9). ``form``: re-shown with the error on a malformed binding.

    Raises:
        Http404: unknown case, or outside the user's scope.
    """
    page = reverse("review:case", args=[case_id])
    try:
        scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
        signed = sign()
        outcome = review_service.case_decide(decision=signed)
    except ValidationError:
        if form is None:
            messages.error(request, "The decision binding is not valid; reload the case.")
            return see_other(page)
        form.add_error(None, "The binding on the page is not a valid decision binding; reload the case.")
        return _case_page(request, case_id, form=form, status=400)
    except ACTION_ERRORS as exc:
        failed = Action(failed="Could not apply the decision", back=page, result=page, unchanged="nothing was applied")
        return action_failed(request, exc, failed)
    _decided_message(request, outcome, passkey=getattr(signed, "passkey", None) is not None)
    return see_other(page)


def _decided_message(request: HttpRequest, outcome: DecisionOutcome, *, passkey: bool) -> None:
    if not outcome.applied:
        messages.error(request, format_html(
            "<strong>Refused: the run stays frozen.</strong> The runtime did not apply your {} "
            "decision: {}. The refusal is recorded in the run's trace; review the case again and "
            "sign a fresh decision.", outcome.decision, outcome.reason), extra_tags="refusal")
        return
    messages.success(request, format_html(
        '{} signed by {}{} and applied{}: run <a href="{}">{}</a> is now <strong>{}</strong>.',
        outcome.decision.capitalize(), request.user.get_username(), " with a passkey" if passkey else "",
        " (it had already been applied)" if outcome.already_applied else "",
        reverse("review:run", args=[outcome.run_id]), outcome.run_id, outcome.phase))
