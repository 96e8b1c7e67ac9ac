"""The runs list page: filters, one page of runs with their checkpoint verdicts, and the filter
choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import QuerySet

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
    """A page of :class:`RunRow` (``page.object_list``); ``live``: a row is in a live phase."""

    page: Page
    live: bool


def run_list(*, filters: RunFilters, page_number: Any = 1) -> RunsPage:
    """The runs matching ``filters``, newest first, one page at a time.

    Args:
        filters: what to match.
        page_number: 1-based page; anything invalid gives the first or last page.
    """
    runs = filters.apply(runs_with_lease()).order_by("-created_at", "-run_id")
    page = Paginator(runs, RUNS_PER_PAGE).get_page(page_number)
    page_runs = list(page.object_list)
    statuses = committed_statuses(runs=page_runs)
    page.object_list = [
        RunRow(run=r, hwm_generation=statuses[r.run_id][0], checkpoint=statuses[r.run_id][1])
        for r in page_runs
    ]
    return RunsPage(page=page, live=any(r.phase in LIVE_PHASES for r in page_runs))


def run_filter_choices() -> dict[str, list[str]]:
    """Known tenants and tasks (at most 200 each) to suggest in the runs list filters."""
    distinct = Run.objects.order_by()
    return {
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
