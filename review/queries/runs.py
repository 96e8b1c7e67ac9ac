"""Runs as every dashboard page reads them: the lease judged by the database clock, which phases
are live or cancellable, and how often pages with live runs refresh."""

from __future__ import annotations

from django.db.models import BooleanField, Case, QuerySet, Value, When
from django.db.models.functions import Now

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


def run_get(*, run_id: str) -> Run:
    """One run with ``lease_current`` (database clock).

    Raises:
        RunNotFoundError: no such run.
    """
    run = runs_with_lease().filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    return run
