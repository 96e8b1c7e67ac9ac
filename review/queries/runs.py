"""Runs as every dashboard page reads them: the lease judged by the database clock, which phases
are live or cancellable, and how often pages with live runs refresh."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import BooleanField, Case, QuerySet, Value, When
from django.db.models.functions import Now

from review.scope import AllTenants, scope_filter, scope_tenants
from runtime.errors import RunNotFoundError
from runtime.models import Phase, Run

POLL_SECONDS = 5
"""How often (seconds) pages with live runs refresh themselves."""

LIVE_PHASES = frozenset({Phase.RUNNING.value, Phase.PENDING.value})
"""Phases in which a worker is advancing the run, so its status changes without a human."""
CANCELLABLE_PHASES = frozenset({*LIVE_PHASES, "awaiting_approval", "needs_review"})
"""Phases an operator may cancel: live runs, and runs frozen for an approval or a review."""

CHOICES_LIMIT = 200
"""At most this many distinct values are suggested in a filter's choices."""


def runs_with_lease() -> QuerySet[Run]:
    """Runs with ``lease_current`` computed by the database clock (DESIGN.md section 4)."""
    return Run.objects.defer("spec").annotate(
        lease_current=Case(
            When(lease_expires_at__gt=Now(), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        )
    )


def run_get(*, run_id: str, user: Any) -> Run:
    """One run with ``lease_current`` (database clock), if ``user`` may see its tenant.

    Raises:
        RunNotFoundError: no such run, or outside the user's tenant scope (DESIGN.md section
            6.6: answered like a run that does not exist).
    """
    run = scope_filter(user=user, queryset=runs_with_lease().filter(run_id=run_id)).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    return run


@dataclass(frozen=True)
class ScopedRunFilters:
    """The runs list's filters (anything with ``apply(queryset) -> queryset``) followed by the
    user's tenant scope (DESIGN.md section 6.6), so the list, its keyset pages and its poll token
    only ever see runs of the tenants the user may see."""

    filters: Any
    user: Any

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` narrowed by the filters, then by the scope."""
        return scope_filter(user=self.user, queryset=self.filters.apply(runs))


def run_choices_scoped(*, user: Any, choices: dict[str, list[str]]) -> dict[str, list[str]]:
    """The runs list's filter suggestions (``{"tenants": [...], "tasks": [...]}``, shared by
    every user) cut down to the tenants ``user`` may see (DESIGN.md section 6.6): the tenants
    are intersected with the scope, and the tasks are re-read from the user's runs (one
    DISTINCT query, at most ``CHOICES_LIMIT``) so no other tenant's task name is suggested."""
    scope = scope_tenants(user=user)
    if isinstance(scope, AllTenants):
        return choices
    tasks = list(scope_filter(user=user, queryset=Run.objects.order_by())
                 .values_list("task_id", flat=True).distinct().order_by("task_id")[:CHOICES_LIMIT])
    return {**choices, "tenants": [t for t in choices.get("tenants", []) if t in scope],
            "tasks": tasks}
