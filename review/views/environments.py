"""Re-registering a run's environment from the dashboard (DESIGN.md section 4.16).

Who: ``review.decide_case`` (the reviewers and admins), within tenant scope: the run must be one
the user may see (``run_get`` answers 404 otherwise). The statement is signed with the reviewer
role key this process holds, naming the signed-in user, and applied by the same service as
``manage.py environments reregister`` (``runtime.ownership.reregistration``); then a 303 back to
the run page with the outcome as a message.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from review.permissions import Perm, require_perm
from review.queries.runs import run_get
from review.views.common import see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.ownership import reregistration as reregistration_service


class ReregisterForm(forms.Form):
    """What the person read on the environment, and why it is sound."""

    observed_fence = forms.IntegerField(min_value=0, max_value=reregistration_service.MAX_FENCE)
    reason = forms.CharField(max_length=500)


@require_perm(Perm.DECIDE_CASE)
@require_POST
@not_found_is_404
def environment_reregister_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """Re-register the environment ``run_id`` acts on, signed as the signed-in reviewer."""
    run = run_get(run_id=run_id, user=request.user)
    page = reverse("review:run", args=[run_id])
    form = ReregisterForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The environment was not re-registered: " + "; ".join(
            f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()))
        return see_other(page)
    try:
        done = reregistration_service.environment_reregister(signed=reregistration_service.reregistration_sign(
            instance_id=run.environment_instance_id, observed_fence=form.cleaned_data["observed_fence"],
            reviewer=request.user.get_username(), reason=form.cleaned_data["reason"]))
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, Action(failed="The environment was not re-registered", back=page,
                                                  result=page))
    messages.success(request, f"Environment {done.instance_id} re-registered: fencing token {done.token_before} "
                              f"-> {done.token_after}, traced on {len(done.runs_traced)} run(s).")
    return see_other(page)
