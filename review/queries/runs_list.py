"""The runs list page: filters (phase, tenant, task, run-id and idempotency-key prefixes, a date
range), sortable columns with keyset pages, the checkpoint verdicts of a page, and the filter
choices (DESIGN.md section 6.8)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.core.cache import cache
from django.db.models import Q, QuerySet, Subquery

from review.queries.committed_status import CheckpointStatus, committed_statuses
from review.queries.runs import CHOICES_LIMIT, LIVE_PHASES, runs_with_lease
from runtime.models import IdempotencyRecord, Run

RUNS_PER_PAGE = 25


SORTS: dict[str, str] = {"created": "created_at", "updated": "updated_at", "run": "run_id",
                         "phase": "phase", "tenant": "tenant_id", "task": "task_id"}
"""Sort keys the runs list accepts (``?sort=key`` ascending, ``?sort=-key`` descending) -> column.
Only non-null columns: the keyset comparison below needs a value on every row."""
DEFAULT_SORT = "-created"
KEY_MATCHES = 200
"""A key prefix matches the runs of at most this many idempotency records."""


def sort_parse(text: str) -> tuple[str, bool]:
    """``(sort key, descending)`` for ``?sort=``; anything not in ``SORTS`` is ``DEFAULT_SORT``."""
    key = text.removeprefix("-")
    if key not in SORTS:
        return DEFAULT_SORT.removeprefix("-"), True
    return key, text.startswith("-")


@dataclass(frozen=True)
class RunFilters:
    """Runs list filters; empty strings mean "any".

    ``q``: the search box: the runs ``review.queries.search.search_runs`` matched are passed in
    ``matched`` (a partial run id, key, path, action or message words); without ``matched``, ``q``
    is a run-id prefix. ``key``: the leading part of an idempotency key the run used (the key's
    unique index serves it). ``date_field`` (``created`` or ``updated``) with ``date_from`` and
    ``date_to``: days, inclusive, UTC (``None``: open). Built from a query string by
    ``review.filters``, which parses every value once.
    """

    phase: str = ""
    tenant: str = ""
    task: str = ""
    q: str = ""
    key: str = ""
    date_field: str = "created"
    date_from: date | None = None
    date_to: date | None = None
    matched: tuple[str, ...] | None = None
    capped: bool = False
    """The search named more runs than it reads (the page asks to narrow it)."""

    def apply(self, runs: QuerySet[Run]) -> QuerySet[Run]:
        """``runs`` narrowed by every non-empty filter."""
        if self.phase:
            runs = runs.filter(phase=self.phase)
        if self.tenant:
            runs = runs.filter(tenant_id=self.tenant)
        if self.task:
            runs = runs.filter(task_id=self.task)
        if self.matched is not None:
            runs = runs.filter(run_id__in=self.matched)
        elif self.q:
            runs = runs.filter(run_id__startswith=self.q)
        if self.key:
            keyed = (IdempotencyRecord.objects.filter(idempotency_key__startswith=self.key)
                     .values("run_id")[:KEY_MATCHES])
            runs = runs.filter(run_id__in=Subquery(keyed))
        column = "updated_at" if self.date_field == "updated" else "created_at"
        if self.date_from is not None:
            runs = runs.filter(**{f"{column}__gte": datetime.combine(self.date_from, time.min, UTC)})
        if self.date_to is not None:
            end = datetime.combine(self.date_to + timedelta(days=1), time.min, UTC)
            runs = runs.filter(**{f"{column}__lt": end})
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
    sort: str = DEFAULT_SORT
    """The order shown (``key`` or ``-key``)."""

    @property
    def sort_label(self) -> str:
        """The order in words, e.g. ``"updated, newest first"`` or ``"tenant, A to Z"``."""
        key, descending = sort_parse(self.sort)
        timed = key in ("created", "updated")
        way = ("newest first" if descending else "oldest first") if timed else ("Z to A" if descending else "A to Z")
        return f"{key}, {way}"

    @property
    def sorting(self) -> dict[str, dict[str, str]]:
        """Per sort key: ``link`` (the ``sort`` value its header links to), ``aria`` (its
        ``aria-sort``) and ``arrow`` (a visible mark of the current order)."""
        return {key: {"link": self.sort_link(key), "aria": self.aria_sort(key),
                      "arrow": {"ascending": " ▲", "descending": " ▼"}.get(self.aria_sort(key), "")}
                for key in SORTS}

    def sort_link(self, key: str) -> str:
        """The ``sort`` value a column header links to: this key, descending first, flipped
        when it is the current order."""
        return key if self.sort == f"-{key}" else f"-{key}"

    def aria_sort(self, key: str) -> str:
        """``ascending``, ``descending`` or ``none`` for a column header's ``aria-sort``."""
        if self.sort == key:
            return "ascending"
        return "descending" if self.sort == f"-{key}" else "none"


def _after(runs: QuerySet[Run], cursor: str, column: str, descending: bool) -> QuerySet[Run]:
    """Runs after the run ``cursor`` names in the ``(column, run_id)`` order. The anchor's value
    is read by a subquery, so the comparison is column against column (no timestamp travels
    through the URL and back in another precision)."""
    if not cursor:
        return runs
    if column == "run_id":
        return runs.filter(run_id__lt=cursor) if descending else runs.filter(run_id__gt=cursor)
    anchor = Subquery(Run.objects.filter(run_id=cursor).values(column)[:1])
    beyond = "lt" if descending else "gt"
    # ``column >= anchor`` first (``<=`` descending): a bound the ``(column, run_id)`` index
    # starts its scan at; the OR alone would make the database read the order from its start.
    return runs.filter(Q(**{f"{column}__{beyond}e": anchor}),
                       Q(**{f"{column}__{beyond}": anchor}) | Q(**{f"run_id__{beyond}": cursor}))


def run_list(*, filters: Any, cursor: str = "", since: str | None = None,
             extra: Any = (), sort: str = DEFAULT_SORT) -> RunsPage | None:
    """The runs matching ``filters`` in ``sort`` order, one keyset page after ``cursor``.

    Keyset, not ``OFFSET``: the query reads ``RUNS_PER_PAGE + 1`` rows in the ``(column,
    run_id)`` order wherever the page is, and no ``COUNT(*)`` runs (DESIGN.md section 6.8).
    Indexes serve every order: newest first (also per phase), ``updated``, the run id, and
    tenant, task and phase each then the run id (DESIGN.md section 6.8). Two queries (the page,
    then the checkpoint verdicts of its rows).

    Args:
        filters: what to match (:class:`RunFilters`, or anything with ``apply(queryset)``).
        cursor: the run id of the last run of the previous page; ``""``: the first page.
        since: a poll's token; when it equals this page's token, ``None`` is returned (one query).
        extra: anything else the page's token depends on (the navigation counts).
        sort: ``key`` or ``-key`` of ``SORTS`` (anything else: ``DEFAULT_SORT``).
    """
    key, descending = sort_parse(sort)
    column = SORTS[key]
    order = [f"-{column}", "-run_id"] if descending else [column, "run_id"]
    if column == "run_id":
        order = order[:1]
    runs = _after(filters.apply(runs_with_lease()), cursor, column, descending).order_by(*order)
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
        sort=("-" if descending else "") + key,
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
