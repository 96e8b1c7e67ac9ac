"""The runs list page: filters, one page of runs with their checkpoint verdicts, and the filter
choices."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db.models import Q, QuerySet, Subquery

from review.queries.committed_status import CheckpointStatus, committed_statuses
from review.queries.runs import CHOICES_LIMIT, LIVE_PHASES, runs_with_lease
from runtime.models import Run

RUNS_PER_PAGE = 25


@dataclass(frozen=True)
class RunFilters:
    """Runs list filters; empty strings mean "any". ``q`` matches part of the run id."""

    phase: str = ""
    tenant: str = ""
    task: str = ""
    q: str = ""

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` narrowed by every non-empty filter (exact phase/tenant/task, run id part)."""
        if self.phase:
            runs = runs.filter(phase=self.phase)
        if self.tenant:
            runs = runs.filter(tenant_id=self.tenant)
        if self.task:
            runs = runs.filter(task_id=self.task)
        if self.q:
            runs = runs.filter(run_id__icontains=self.q)
        return runs


@dataclass(frozen=True)
class RunRow:
    """One runs-list row: the run (with ``lease_current`` judged by the database clock), the HWM
    generation (``None`` when the HWM row is missing) and the committed checkpoint's status."""

    run: Run
    hwm_generation: int | None
    checkpoint: CheckpointStatus


@dataclass(frozen=True)
class RunsPage:
    """One keyset page of :class:`RunRow` (DESIGN.md section 6.8): ``rows`` newest first,
    ``next_cursor`` for the older page (``""`` on the last), ``first``: this is the newest page,
    ``live``: a row is in a live phase, ``token``: what a poll compares (see ``review.queries.live``).
    """

    rows: list[RunRow]
    next_cursor: str
    first: bool
    live: bool
    token: str


def _after(runs: QuerySet[Run], cursor: str) -> QuerySet[Run]:
    """Runs older than the run ``cursor`` names in the ``(created_at, run_id)`` order. The anchor's
    timestamp is read by a subquery, so the comparison is column against column (no timestamp
    travels through the URL and back in another precision)."""
    if not cursor:
        return runs
    anchor = Subquery(Run.objects.filter(run_id=cursor).values("created_at")[:1])
    return runs.filter(Q(created_at__lt=anchor) | Q(created_at=anchor, run_id__lt=cursor))


def run_list(*, filters: RunFilters, cursor: str = "", since: str | None = None,
             extra: Any = ()) -> RunsPage | None:
    """The runs matching ``filters``, newest first, one keyset page after ``cursor``.

    Keyset, not ``OFFSET``: the query reads ``RUNS_PER_PAGE + 1`` index entries from the
    ``(created_at, run_id)`` order wherever the page is, and no ``COUNT(*)`` runs (DESIGN.md
    section 6.8). Two queries (the page, then the checkpoint verdicts of its rows).

    Args:
        filters: what to match.
        cursor: the run id of the last run of the previous page; ``""``: the newest page.
        since: a poll's token; when it equals this page's token, ``None`` is returned (one query).
        extra: anything else the page's token depends on (the navigation counts).
    """
    runs = _after(filters.apply(runs_with_lease()), cursor).order_by("-created_at", "-run_id")
    fetched = list(runs[: RUNS_PER_PAGE + 1])
    page_runs = fetched[:RUNS_PER_PAGE]
    token = hashlib.sha256(repr((
        [(r.run_id, r.phase, r.state_version, r.lease_version, r.owner_worker) for r in page_runs],
        extra,
    )).encode()).hexdigest()[:16]
    if since is not None and since == token:
        return None
    statuses = committed_statuses(runs=page_runs)
    return RunsPage(
        rows=[RunRow(run=r, hwm_generation=statuses[r.run_id][0], checkpoint=statuses[r.run_id][1])
              for r in page_runs],
        next_cursor=page_runs[-1].run_id if len(fetched) > RUNS_PER_PAGE else "",
        first=not cursor,
        live=any(r.phase in LIVE_PHASES for r in page_runs),
        token=token,
    )


FILTER_CHOICES_SECONDS = 300
"""How long the tenant and task suggestions are kept (seconds): two DISTINCTs over every run are
not run per request (DESIGN.md section 6.8)."""


def run_filter_choices() -> dict[str, list[str]]:
    """Known tenants and tasks (at most 200 each) to suggest in the runs list filters; cached
    for ``FILTER_CHOICES_SECONDS``."""
    choices = cache.get("ratchet:run-filter-choices")
    if choices is not None:
        return choices
    distinct = Run.objects.order_by()
    choices = {
        "tenants": list(
            distinct.values_list("tenant_id", flat=True)
            .distinct()
            .order_by("tenant_id")[:CHOICES_LIMIT]
        ),
        "tasks": list(
            distinct.values_list("task_id", flat=True)
            .distinct()
            .order_by("task_id")[:CHOICES_LIMIT]
        ),
    }
    cache.set("ratchet:run-filter-choices", choices, FILTER_CHOICES_SECONDS)
    return choices
