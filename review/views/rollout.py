"""The rollout pages, admins only: admission scopes and their thresholds (edited with a
confirmation step and an audit trail), re-opening a closed scope with a signed decision, and
the version combinations with promote and rollback (DESIGN.md sections 8.3 and 8.4).

Who: every view needs ``review.view_trace`` (the admin-only permission, so the authorization
matrix checks it like the other admin pages) and then the whole admin role (every dashboard
permission): a group given only the trace permission does not get to change rollout state.
Tenant scope (``review.scope``): a scope or combination of a tenant outside the user's scope is
a 404, and the global ``*/*`` thresholds need a user who sees every tenant.

Each change is a POST with CSRF calling the same runtime service as the command line, with the
signed-in user as the actor (``runtime.rollout.admission``, ``runtime.rollout.admission_thresholds``,
``runtime.rollout.combinations``), then a 303 back to the page with the outcome as a message.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from review.forms_rollout import PromoteForm, ReopenForm, RollbackForm, ThresholdForm
from review.permissions import Perm, require_perm
from review.queries.rollout import (
    admission_scope_view,
    combination_rows,
    combination_tenant,
    combination_view,
    rollout_overview,
    rollout_scope_allowed,
)
from review.views.common import see_other
from review.views.errors import ACTION_ERRORS, Action, action_failed, not_found_is_404
from runtime.models import AdmissionThreshold, Combination
from runtime.rollout import admission as admission_service
from runtime.rollout import admission_thresholds as threshold_service
from runtime.rollout import combinations as combination_service


def _admin_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Refuse (403) a user who holds the trace permission but not the whole admin role."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.has_perms([p.value for p in Perm]):
            raise PermissionDenied("the rollout pages are the admin role's")
        return view(request, *args, **kwargs)

    return wrapped


def _scope_check(request: HttpRequest, tenant_id: str, task_id: str) -> None:
    if tenant_id == "*" and task_id != "*":
        raise Http404("no such scope")
    if not rollout_scope_allowed(user=request.user, tenant_id=tenant_id):
        raise Http404("no such scope")


def _combination(request: HttpRequest, combination_id: str) -> Combination:
    """The combination, if the user may see its tenant (else a 404, as for an unknown one).

    Raises:
        CombinationNotFoundError: no such combination (a 404 through ``not_found_is_404``).
    """
    combo = combination_service.combination_get(combination_id=combination_id)
    if not rollout_scope_allowed(user=request.user, tenant_id=combination_tenant(combo)):
        raise Http404("no such combination")
    return combo


def _form_refused(request: HttpRequest, form: Any, back: str, *, failed: str = "Nothing was changed"
                  ) -> HttpResponse:
    """A refused form: its errors as one message, 303 back to the page."""
    errors = "; ".join(f"{name}: {' '.join(errors)}" if name != "__all__" else " ".join(errors)
                       for name, errors in form.errors.items())
    messages.error(request, f"{failed}: {errors}")
    return see_other(back)


def _action(back: str, failed: str) -> Action:
    return Action(failed=failed, back=back, result=back)


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_safe
def rollout(request: HttpRequest) -> HttpResponse:
    """Every admission scope the admin may see, closed ones first, with links to each scope's
    thresholds (and the tenant-wide and global ones)."""
    return render(request, "review/rollout.html", {"overview": rollout_overview(user=request.user)})


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_safe
def admission_scope(request: HttpRequest, tenant_id: str, task_id: str) -> HttpResponse:
    """One scope: state, effective thresholds and their source, the edit form, the audit trail,
    runs with pending side effects and (when closed) the re-open form."""
    _scope_check(request, tenant_id, task_id)
    return render(request, "review/admission_scope.html", {
        "view": admission_scope_view(tenant_id=tenant_id, task_id=task_id),
        "threshold_form": ThresholdForm(), "reopen_form": ReopenForm()})


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_POST
def admission_threshold(request: HttpRequest, tenant_id: str, task_id: str) -> HttpResponse:
    """Change one threshold override: first answer with a confirmation page showing the old and
    new values (200); the confirmed POST (``confirm=yes``) applies it and appends the audit row."""
    _scope_check(request, tenant_id, task_id)
    back = reverse("review:admission-scope", args=[tenant_id, task_id])
    form = ThresholdForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, form, back)
    if not form.confirmed:
        return _threshold_confirm(request, tenant_id, task_id, form)
    name, value, reason = form.cleaned_data["name"], form.cleaned_data["value"], form.cleaned_data["reason"]
    try:
        change = threshold_service.admission_threshold_set(
            tenant_id=tenant_id, task_id=task_id, name=name, value=value,
            changed_by=request.user.get_username(), reason=reason)
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, _action(back, f"Could not change {name}"))
    messages.success(request, f"{change.name} for {tenant_id}/{task_id}: {change.old_value} -> {change.new_value}. "
                              "The gate uses it from the next run start; the change is in the audit trail.")
    return see_other(back)


def _threshold_confirm(request: HttpRequest, tenant_id: str, task_id: str, form: ThresholdForm) -> HttpResponse:
    """The confirmation page of a valid threshold change: the old value, the effective one and
    its source, and the new value."""
    name = form.cleaned_data["name"]
    current = AdmissionThreshold.objects.filter(tenant_id=tenant_id, task_id=task_id, name=name).first()
    effective = {t.name: t for t in threshold_service.admission_thresholds_explained(
        tenant_id=tenant_id, task_id=task_id)}[name]
    return render(request, "review/admission_confirm.html", {
        "tenant_id": tenant_id, "task_id": task_id, "name": name, "value": form.cleaned_data["value"],
        "reason": form.cleaned_data["reason"], "raw_value": form.data.get("value", ""),
        "current": current, "effective": effective})


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_POST
def admission_reopen(request: HttpRequest, tenant_id: str, task_id: str) -> HttpResponse:
    """Re-open a closed scope with a decision signed by the reviewer trust root, exactly as
    ``manage.py admission reopen`` does, the signed-in admin as ``decided_by``."""
    _scope_check(request, tenant_id, task_id)
    back = reverse("review:admission-scope", args=[tenant_id, task_id])
    form = ReopenForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, form, back, failed="Admission was not re-opened")
    try:
        decision = admission_service.admission_reopen(
            tenant_id=tenant_id, task_id=task_id, decided_by=request.user.get_username(),
            reason=form.cleaned_data["reason"])
    except (*ACTION_ERRORS, ValueError) as exc:
        return action_failed(request, exc, _action(back, "Admission was not re-opened"))
    messages.success(request, f"Admission re-opened for {tenant_id}/{task_id} by a signed decision "
                              f"(key {decision.key_id}).")
    return see_other(back)


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_safe
def combinations(request: HttpRequest) -> HttpResponse:
    """The version combinations: state, share, scope, runs in flight and canary metrics."""
    return render(request, "review/combinations.html", {"rows": combination_rows(user=request.user)})


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_safe
@not_found_is_404
def combination(request: HttpRequest, combination_id: str) -> HttpResponse:
    """One combination: pinned fields, history, in-flight runs with pending side effects, and the
    promote and rollback forms."""
    combo = _combination(request, combination_id)
    return render(request, "review/combination_detail.html", {
        "view": combination_view(combo=combo), "promote_form": PromoteForm(), "rollback_form": RollbackForm()})


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_POST
@not_found_is_404
def combination_promote(request: HttpRequest, combination_id: str) -> HttpResponse:
    """Promote a canary (``combination_promote``: its metrics and a passing regress record are
    required; the refusal names the rule)."""
    combo = _combination(request, combination_id)
    back = reverse("review:combination", args=[combo.combination_id])
    form = PromoteForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, form, back)
    share = form.cleaned_data["share"]
    try:
        promoted = combination_service.combination_promote(
            combination_id=combo.combination_id, actor=request.user.get_username(),
            reason=form.cleaned_data["reason"], share=1.0 if share is None else share)
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, _action(back, "Could not promote the combination"))
    messages.success(request, f"Combination {combo.combination_id[:19]} is {promoted.state}, share {promoted.share:g}.")
    return see_other(back)


@require_perm(Perm.VIEW_TRACE)
@_admin_only
@require_POST
@not_found_is_404
def combination_rollback(request: HttpRequest, combination_id: str) -> HttpResponse:
    """Roll a combination back (``combination_rollback``); the page then lists its in-flight runs
    with their pending side effects."""
    combo = _combination(request, combination_id)
    back = reverse("review:combination", args=[combo.combination_id])
    form = RollbackForm(request.POST)
    if not form.is_valid():
        return _form_refused(request, form, back)
    try:
        in_flight = combination_service.combination_rollback(
            combination_id=combo.combination_id, actor=request.user.get_username(), reason=form.cleaned_data["reason"])
    except ACTION_ERRORS as exc:
        return action_failed(request, exc, _action(back, "Could not roll the combination back"))
    pending = sum(1 for run in in_flight if run.pending_keys)
    messages.warning(request, f"Combination {combo.combination_id[:19]} is rolled back: it takes no new run. "
                              f"{len(in_flight)} run(s) in flight, {pending} with pending side effects to check "
                              "one by one (listed below).")
    return see_other(back)
