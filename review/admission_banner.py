"""Template context for the dashboard's admission banner (DESIGN.md section 8.3).

``admission_closed`` is lazy: the closed scopes are computed only when a page that shows the
banner (``templates/review/_admission_banner.html``) reads it, for a signed-in user. Each closed
scope the user may see (``review.scope``: another tenant's closed scope is left out, like its
runs) comes with its runs in flight that have unresolved pending side effects, to check one by
one before an admin re-opens it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from review.scope import scope_allows
from runtime.rollout.admission import AdmissionState, admission_closed_scopes
from runtime.rollout.pending_effects import PendingRun, pending_runs_of_scope

BANNER_RUNS = 20
"""Runs listed per closed scope in the banner; the rollout page lists more."""


@dataclass(frozen=True)
class ClosedScope:
    """A closed scope for the banner: its state, up to :data:`BANNER_RUNS` runs with pending
    side effects, and how many such runs there are in all."""

    state: AdmissionState
    pending_runs: list[PendingRun]
    pending_total: int

    @property
    def more(self) -> int:
        return self.pending_total - len(self.pending_runs)


def admission_banner_scopes(*, user: Any) -> list[ClosedScope]:
    """The closed scopes ``user`` may see, each with its runs with pending side effects."""
    out = []
    for state in admission_closed_scopes():
        if not scope_allows(user=user, tenant_id=state.tenant_id):
            continue
        runs, total = pending_runs_of_scope(tenant_id=state.tenant_id, task_id=state.task_id, limit=BANNER_RUNS)
        out.append(ClosedScope(state=state, pending_runs=runs, pending_total=total))
    return out


def admission_banner(request: HttpRequest) -> dict[str, Any]:
    """``{"admission_closed": [ClosedScope, ...]}`` (lazy), empty for anonymous requests."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"admission_closed": []}
    return {"admission_closed": SimpleLazyObject(lambda: admission_banner_scopes(user=user))}
