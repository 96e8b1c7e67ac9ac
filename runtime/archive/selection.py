"""Which runs an archive pass may take (DESIGN.md section 4.11).

A run is archivable when it is finished (completed, failed or cancelled), has not been updated
for the retention age (judged by the database clock), holds no unexpired lease, has no open
review case, and no unfinished run acts on the same environment instance (such a run's
reconciliation may read receipts this run left). Runs already archived are not candidates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.functions import Now

from runtime.core.checkpoint import TERMINAL_PHASES
from runtime.database.clock import db_now
from runtime.models import CaseStatus, ReviewCase, Run

FINISHED_PHASES = tuple(sorted(p.value for p in TERMINAL_PHASES))
"""Phases a run can be archived in: a run in any other phase may still commit."""


@dataclass(frozen=True)
class ArchiveSelection:
    """What a pass looks at.

    Attributes:
        older_than: seconds since the run's last update (``updated_at``, database clock), > 0.
        phases: which finished phases (a subset of :data:`FINISHED_PHASES`).
        tenants: only these tenants (empty: every tenant).
        limit: at most this many runs per pass (None: no limit).
    """

    older_than: float
    phases: tuple[str, ...] = FINISHED_PHASES
    tenants: tuple[str, ...] = ()
    limit: int | None = None


def selection_check(selection: ArchiveSelection) -> None:
    """Refuse a selection that could take a live run.

    Raises:
        ValueError: ``older_than`` is not positive, or a phase is not a finished phase.
    """
    if not selection.older_than > 0:
        raise ValueError("--older-than must be a positive duration")
    unknown = sorted(set(selection.phases) - set(FINISHED_PHASES))
    if unknown:
        raise ValueError(f"only finished runs are archived ({', '.join(FINISHED_PHASES)}); "
                         f"not {', '.join(unknown)}")


def archivable(runs: QuerySet[Run]) -> QuerySet[Run]:
    """``runs`` narrowed to those nothing live needs (see the module docstring); the rule is
    re-applied under the run's row lock when it is archived."""
    open_case = ReviewCase.objects.filter(run_id=OuterRef("run_id"), status=CaseStatus.OPEN)
    live_peer = (Run.objects.filter(environment_instance_id=OuterRef("environment_instance_id"))
                 .exclude(phase__in=FINISHED_PHASES))
    live_lease = Q(lease_expires_at__gt=Now()) & ~Q(owner_worker="")
    return (runs.filter(phase__in=FINISHED_PHASES, archived_at__isnull=True)
            .exclude(live_lease).exclude(Exists(open_case)).exclude(Exists(live_peer)))


def archive_candidates(selection: ArchiveSelection) -> list[str]:
    """Run ids the pass would archive, oldest update first.

    Raises:
        ValueError: as :func:`selection_check`.
    """
    selection_check(selection)
    cutoff = db_now() - timedelta(seconds=selection.older_than)
    runs = Run.objects.filter(phase__in=selection.phases, updated_at__lt=cutoff)
    if selection.tenants:
        runs = runs.filter(tenant_id__in=selection.tenants)
    ids = archivable(runs).order_by("updated_at", "run_id").values_list("run_id", flat=True)
    return list(ids if selection.limit is None else ids[: selection.limit])


def still_archivable(run_ids: Iterable[str]) -> set[str]:
    """Which of ``run_ids`` are still archivable now (called under the row lock)."""
    return set(archivable(Run.objects.filter(run_id__in=list(run_ids))).values_list("run_id", flat=True))
