"""Several waiting approvals approved or denied in one action (DESIGN.md section 6.15).

The queue's cards each carry a checkbox whose value is the run id, intent digest and environment
fingerprint the card shows; one POST decides the checked ones through
``runtime.decisions.batch.approvals_batch_decide``, which decides every item on its own (bound to
its own digest and fingerprint, under the user's tenant scope) and reports each. The answer is a
303 back to the queue with one message listing every item's result: a stale item is named with
its reason and never hides the others.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from review.forms_batch import BatchForm
from review.permissions import Perm, require_perm
from review.scope import scope_run_check
from review.views.common import see_other
from runtime.core.denial_evidence import DenyMode
from runtime.decisions import batch as batch_service
from runtime.decisions.batch import BatchResult
from runtime.errors import RatchetError

WORDS = {"granted": "approved", "refreshed": "approved (refreshed)", "reconciled": "already written (reconciled)",
         "denied": "denied, run stopped", "denied_with_feedback": "denied, the agent tries something else"}


@require_perm(Perm.APPROVE_ACTION)
@require_POST
def approvals_batch(request: HttpRequest) -> HttpResponse:
    """Approve or deny the checked approvals (``item`` values) each on its own; 303 to the queue
    with every item's result. Denying also needs the deny permission."""
    back = reverse("review:approvals")
    form = BatchForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return see_other(back)
    data, user = form.cleaned_data, request.user
    if data["decision"] == "deny" and not user.has_perm(Perm.DENY_ACTION.value):
        raise PermissionDenied(f"{Perm.DENY_ACTION.value} is required")
    try:
        results = batch_service.approvals_batch_decide(
            items=form.items(), approver=user.get_username(), decision=data["decision"], reason=data["reason"],
            mode=data.get("mode") or DenyMode.STOP, comment=data.get("comment") or None,
            may_refresh=user.has_perm(Perm.REFRESH_APPROVAL.value),
            check=lambda run_id: scope_run_check(user=user, run_id=run_id))
    except RatchetError as exc:
        messages.error(request, f"Nothing was decided: {exc.message}.")
        return see_other(back)
    _report(request, results)
    return see_other(back)


def _report(request: HttpRequest, results: list[BatchResult]) -> None:
    done = sum(1 for r in results if r.ok)
    lines = format_html_join("", '<li data-batch-run="{}" data-batch-ok="{}"><a class="mono" href="{}">{}</a>: {}</li>',
                             ((r.run_id, "yes" if r.ok else "no", reverse("review:run", args=[r.run_id]), r.run_id,
                               WORDS.get(r.outcome, r.outcome) if r.ok else f"not decided: {r.message}")
                              for r in results))
    text = format_html('{} of {} decided.{} <ul class="batch-results">{}</ul>', done, len(results),
                       "" if done == len(results) else " Nothing was changed for the others.", lines)
    (messages.success if done == len(results) else messages.warning)(request, text)
