"""Review cases: the list, one case with its evidence, and the reviewer's signed decision.

A case page shows the pending intent beside the conflicting receipt (differing fields
highlighted), the fingerprints, the trace excerpt kept with the case, and the exact binding a
decision will be signed over (``runtime.decisions.reviews.decision_prepare``). Deciding is a POST with
CSRF and the reviewer's password re-entered; the view signs *the binding the page showed*
(``decision_sign_for``) as the signed-in user and hands it to ``case_decide``. If the run or its
environment changed between viewing and signing, the runtime refuses the decision, keeps the run
frozen and records the refusal in the trace; the page says so (DESIGN.md section 6).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import uuid4

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST, require_safe
from kombu.exceptions import OperationalError as BrokerUnavailableError
from pydantic import ValidationError

from review.forms import CaseFilterForm, DecisionForm, binding_token
from review.passkeys import passkey_list
from review.permissions import Perm, require_perm
from review.queries.cases import case_counts, case_get, case_list
from review.queries.conflict_evidence import conflict_evidence
from review.queries.live import cases_token, nav_counts
from review.scope import scope_case_check
from review.throttle import login_failure_record, login_success_record, login_throttle_check
from review.views import fragment_requested, poll_context
from runtime.decisions import reviews as review_service
from runtime.core.checkpoint import SignedDecision
from runtime.errors import LeaseError, LeaseHeldError, RatchetError, ReviewCaseNotFoundError


def _see_other(url: str) -> HttpResponseRedirect:
    response = HttpResponseRedirect(url)
    response.status_code = 303
    return response


@require_perm(Perm.DECIDE_CASE)
@require_safe
def cases(request: HttpRequest) -> HttpResponse:
    """Review cases, open ones first; filter by status; paginated (``CASES_PER_PAGE``)."""
    form = CaseFilterForm(request.GET)
    counts = nav_counts(user=request.user)
    live = poll_context(request, token=cases_token(counts, user=request.user,
                                                   status=form.status_value()))
    if live is None:
        return HttpResponse(status=204)
    context = {
        **live,
        "nav": counts,
        "form": form,
        "page": case_list(user=request.user, status=form.status_value(),
                          page_number=request.GET.get("page")),
    }
    if live["announce"]:
        context["announce"] = f"Review cases updated: {counts.cases_label} open."
        return render(request, "review/cases.html#live", context)
    if fragment_requested(request):
        return render(request, "review/cases.html#cases-table", context)
    context["counts"] = case_counts(user=request.user)
    return render(request, "review/cases.html", context)


def _case_page(
    request: HttpRequest,
    case_id: str,
    *,
    form: DecisionForm | None = None,
    status: int = 200,
    lockout: Any = None,
) -> HttpResponse:
    try:
        scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
        detail = case_get(case_id=case_id)
    except ReviewCaseNotFoundError:
        raise Http404("no such review case") from None
    # The hidden binding is always the one on the page now, even when the form is re-shown after
    # a failed attempt: what the reviewer reads is what gets signed.
    token = binding_token(case_id=case_id, binding=detail.binding) if detail.binding else ""
    if form is None:
        form = DecisionForm(case_id=case_id)
    context = {
        "detail": detail,
        "case": detail.case,
        "evidence": conflict_evidence(case=detail.case),
        "form": form,
        "lockout": lockout,
        "binding_token": token,
        "can_decide": detail.binding is not None,
        "password_fallback": settings.RATCHET_REVIEW_PASSWORD_FALLBACK,
        "passkeys": passkey_list(reviewer=request.user.get_username()),
    }
    response = render(request, "review/case_detail.html", context, status=status)
    if lockout is not None:
        response["Retry-After"] = str(lockout.retry_after_seconds)
    return response


@require_perm(Perm.DECIDE_CASE)
@require_safe
def case_detail(request: HttpRequest, case_id: str) -> HttpResponse:
    """One case: intent vs receipt, fingerprints, trace excerpt, the binding to sign and, while
    it is open, the decision form (replan or abort, password re-entry)."""
    return _case_page(request, case_id)


@require_perm(Perm.DECIDE_CASE)
@require_POST
@sensitive_post_parameters("password")
def case_decide(request: HttpRequest, case_id: str) -> HttpResponse:
    """Sign the shown binding as the signed-in reviewer and apply it (``case_decide``).

    Answers 400 for an invalid form or a wrong password (counted like a failed sign-in, so the
    password prompt cannot be used to guess it; 429 while locked), otherwise 303 to the case page
    with the outcome: applied, or refused with the runtime's reason and the run still frozen.
    """
    try:
        scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
    except ReviewCaseNotFoundError:
        raise Http404("no such review case") from None
    if not settings.RATCHET_REVIEW_PASSWORD_FALLBACK:
        messages.error(
            request,
            "Signing with a password is turned off here (RATCHET_REVIEW_PASSWORD_FALLBACK=0): "
            "sign with your passkey. Nothing was signed.",
        )
        return _see_other(reverse("review:case", args=[case_id]))
    form = DecisionForm(request.POST, case_id=case_id)
    username = request.user.get_username()
    ip = request.META.get("REMOTE_ADDR", "")
    lockout = login_throttle_check(username=username, ip=ip)
    if lockout is not None:
        return _case_page(request, case_id, form=form, status=429, lockout=lockout)
    if not form.is_valid():
        return _case_page(request, case_id, form=form, status=400)
    if not request.user.check_password(form.cleaned_data["password"]):
        lockout = login_failure_record(username=username, ip=ip)
        form.add_error("password", "That is not your password. Nothing was signed.")
        return _case_page(
            request, case_id, form=form, status=429 if lockout else 400, lockout=lockout
        )
    login_success_record(username=username)
    return decision_apply(
        request,
        case_id,
        form=form,
        sign=lambda: review_service.decision_sign_for(
            case_id=case_id,
            reviewer=username,
            decision=form.cleaned_data["decision"],
            binding=form.cleaned_data["binding"],
        ),
    )


def decision_apply(
    request: HttpRequest,
    case_id: str,
    *,
    sign: Callable[[], SignedDecision],
    form: DecisionForm | None = None,
) -> HttpResponse:
    """Sign (``sign()``) and apply a decision as the signed-in reviewer; answer 303 to the case
    page with the outcome as a message (the password form and the passkey ceremony share it;
    DESIGN.md section 6.9). ``form``: re-shown with the error on a malformed binding.

    Raises:
        Http404: unknown case.
    """
    username = request.user.get_username()
    try:
        scope_case_check(user=request.user, case_id=case_id)  # DESIGN.md section 6.6
        signed = sign()
        # One lease holder per request, not per reviewer: two tabs of the same reviewer must
        # not both "hold" the run's lease (the second would silently fence off the first).
        outcome = review_service.case_decide(
            decision=signed, worker=f"reviewer:{username}:{uuid4().hex[:12]}"
        )
    except ReviewCaseNotFoundError:
        raise Http404("no such review case") from None
    except ValidationError:
        if form is None:
            messages.error(request, "The decision binding is not valid; reload the case.")
            return _see_other(reverse("review:case", args=[case_id]))
        form.add_error(
            None, "The binding on the page is not a valid decision binding; reload the case."
        )
        return _case_page(request, case_id, form=form, status=400)
    except LeaseHeldError:
        messages.warning(
            request,
            "Someone else is changing this run right now (a worker, another reviewer, or you in "
            "another tab or window), so nothing was applied. Reload the case in a few seconds: "
            "if the other change decided it, the page shows that decision.",
        )
        return _see_other(reverse("review:case", args=[case_id]))
    except LeaseError:
        messages.warning(
            request,
            "Another session took over this run while your decision was being applied, so "
            "nothing from this attempt was applied. Reload the case to see its current state.",
        )
        return _see_other(reverse("review:case", args=[case_id]))
    except BrokerUnavailableError:
        messages.warning(
            request,
            "The decision is applied, but the worker queue could not be "
            "reached; the sweeper re-queues the run within its next period.",
        )
        return _see_other(reverse("review:case", args=[case_id]))
    except RatchetError as exc:
        messages.error(request, f"Nothing was applied: {exc}")
        return _see_other(reverse("review:case", args=[case_id]))
    if outcome.applied:
        messages.success(
            request,
            format_html(
                '{} signed by {}{} and applied{}: run <a href="{}">{}</a> is now '
                "<strong>{}</strong>.",
                outcome.decision.capitalize(),
                username,
                " with a passkey" if getattr(signed, "passkey", None) is not None else "",
                " (it had already been applied)" if outcome.already_applied else "",
                reverse("review:run", args=[outcome.run_id]),
                outcome.run_id,
                outcome.phase,
            ),
        )
    else:
        messages.error(
            request,
            format_html(
                "<strong>Refused: the run stays frozen.</strong> The runtime did not apply your "
                "{} decision: {}. The refusal is recorded in the run's trace; review the case "
                "again and sign a fresh decision.",
                outcome.decision,
                outcome.reason,
            ),
            extra_tags="refusal",
        )
    return _see_other(reverse("review:case", args=[case_id]))
