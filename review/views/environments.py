"""Re-registering a run's environment from the dashboard (DESIGN.md section 4.16).

Who: ``review.decide_case`` (the reviewers and admins), within tenant scope: the run must be one
the user may see (``run_get`` answers 404 otherwise), and so must every other run on the same
environment, because moving its fence changes what each of them may do. The run must have
stopped on an adapter refusal (``adapter_refused``), the stop a fence raised outside the control
plane causes; any other stop is not what re-registration is for. The person re-enters their
password first, checked and throttled as for a review decision (``review.stepup``). The statement
is signed with the reviewer role key this process holds, naming the signed-in user, and applied by
the same service as ``manage.py environments reregister`` (``runtime.ownership.reregistration``);
then a 303 back to the run page with the outcome as a message.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from review.permissions import Perm, require_perm
from review.queries.runs import run_get
from review.scope import scope_filter
from review.stepup import stepup_locked, stepup_password_check
from review.views.common import see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.core.checkpoint import StopReason
from runtime.models import Run
from runtime.ownership import reregistration as reregistration_service

REREGISTER_STOP_REASON = StopReason.ADAPTER_REFUSED
"""The stop a fence raised outside the control plane causes (DESIGN.md section 4.16); the run
page offers re-registration only for it, and the view refuses any other."""

_NOT_DONE = "The environment was not re-registered"


class ReregisterForm(forms.Form):
    """What the person read on the environment, why it is sound, and their password re-entered."""

    observed_fence = forms.IntegerField(min_value=0, max_value=reregistration_service.MAX_FENCE)
    reason = forms.CharField(max_length=500)
    password = forms.CharField(strip=False, widget=forms.PasswordInput, max_length=4096)


def _refusal(run: Run, *, user: object) -> str | None:
    """Why this person may not re-register ``run``'s environment at all, or None."""
    if run.stop_reason != REREGISTER_STOP_REASON:
        return (f"run {run.run_id} did not stop on an adapter refusal (its stop reason is "
                f"{run.stop_reason or 'none'}); re-registration is only for an environment whose fence "
                "was raised outside the control plane.")
    on_environment = Run.objects.filter(environment_instance_id=run.environment_instance_id)
    if scope_filter(user=user, queryset=on_environment).count() != on_environment.count():
        return ("the environment also serves runs outside your tenant scope and re-registering it changes "
                "them too; ask someone whose scope covers every run on it.")
    if not settings.RATCHET_REVIEW_PASSWORD_FALLBACK:
        return ("password re-entry is turned off here (RATCHET_REVIEW_PASSWORD_FALLBACK=0); sign the "
                "statement with your own reviewer key: manage.py environments reregister.")
    return None


def _password_refused(request: HttpRequest, form: ReregisterForm) -> str | None:
    """Why the form or the re-entered password is refused (a wrong one counted like a failed
    sign-in, ``review.stepup``), or None when it is valid and the person's password."""
    lockout = stepup_locked(request=request)
    if lockout is not None:
        return f"too many wrong passwords; try again in {lockout.retry_after_seconds} seconds."
    if not form.is_valid():
        return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
    ok, _ = stepup_password_check(request=request, password=form.cleaned_data["password"])
    return None if ok else "that is not your password. Nothing was signed."


@require_perm(Perm.DECIDE_CASE)
@require_POST
@sensitive_post_parameters("password")
@not_found_is_404
def environment_reregister_view(request: HttpRequest, run_id: str) -> HttpResponse:
    """Re-register the environment ``run_id`` acts on, signed as the signed-in reviewer once
    their password is re-entered; every answer is a 303 to the run page with a message."""
    run = run_get(run_id=run_id, user=request.user)
    page = reverse("review:run", args=[run_id])
    form = ReregisterForm(request.POST)
    refusal = _refusal(run, user=request.user) or _password_refused(request, form)
    if refusal is not None:
        messages.error(request, f"{_NOT_DONE}: {refusal}")
        return see_other(page)
    try:
        done = reregistration_service.environment_reregister(signed=reregistration_service.reregistration_sign(
            instance_id=run.environment_instance_id, observed_fence=form.cleaned_data["observed_fence"],
            reviewer=request.user.get_username(), reason=form.cleaned_data["reason"]))
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, Action(failed=_NOT_DONE, back=page, result=page))
    messages.success(request, f"Environment {done.instance_id} re-registered: fencing token {done.token_before} "
                              f"-> {done.token_after}, traced on {len(done.runs_traced)} run(s).")
    return see_other(page)
