"""Trace events as the pages show them: a run's timeline (run detail) and the trace evidence
browser across runs, each with the hash-chain verdict from ``trace_verify``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.cache import cache
from django.core.exceptions import EmptyResultSet
from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import QuerySet

from review.queries.runs import CHOICES_LIMIT
from review.queries.search import search_runs
from review.queries.steps import Step, step_timeline
from review.scope import scope_filter
from runtime.evidence.trace import ChainReport, trace_verify
from runtime.models import Run, TraceEvent

EVENTS_PER_PAGE = 50


CHAIN_VERDICT_SECONDS = 3600
"""How long a run's hash-chain verdict is shown without re-checking (seconds), for one head."""


@dataclass(frozen=True)
class ChainVerdict:
    """A hash-chain verdict and when it was computed (``checked_at``, database-independent UTC);
    ``fresh``: computed for this request."""

    report: ChainReport
    checked_at: datetime
    fresh: bool

    @property
    def ok(self) -> bool:
        return self.report.ok

    @property
    def count(self) -> int:
        return self.report.count

    @property
    def first_bad_seq(self) -> int | None:
        return self.report.first_bad_seq

    @property
    def reason(self) -> str:
        return self.report.reason


def chain_verdict(*, run_id: str, trace_seq: int, trace_head: str,
                  verify: bool = False) -> ChainVerdict | None:
    """The run's hash-chain verdict (DESIGN.md section 6.8): re-checked in full when ``verify``
    (the page's "Verify now" button), otherwise the last verdict for this exact head if one was
    computed, else ``None`` (a page view never re-hashes a whole trace by itself).

    Raises:
        RunNotFoundError: no such run (``verify`` only).
    """
    key = f"ratchet:chain:{run_id}:{trace_seq}:{trace_head}"
    if not verify:
        cached = cache.get(key)
        return ChainVerdict(*cached, fresh=False) if cached else None
    report = trace_verify(run_id=run_id)
    checked_at = datetime.now(UTC)
    cache.set(key, (report, checked_at), CHAIN_VERDICT_SECONDS)
    return ChainVerdict(report, checked_at, fresh=True)


@dataclass(frozen=True)
class Timeline:
    """A page of a run's trace events (newest first) and the chain verdict (``None``: not
    checked for the current head; the page offers a button)."""

    page: Page
    chain: ChainVerdict | None
    steps: list[Step]


def trace_timeline(*, run: Run, page_number: Any = 1, verify: bool = False) -> Timeline:
    """The run's trace, newest event first (one page), with its chain verdict."""
    chain = chain_verdict(run_id=run.run_id, trace_seq=run.trace_seq, trace_head=run.trace_head,
                          verify=verify)
    events = TraceEvent.objects.filter(run_id=run.run_id).order_by("-seq")
    paginator = _KnownCountPaginator(events, EVENTS_PER_PAGE, known_count=run.trace_seq)
    page = paginator.get_page(page_number)
    page.object_list = list(page.object_list)
    return Timeline(page=page, chain=chain, steps=step_timeline(events=page.object_list))


class _KnownCountPaginator(Paginator):
    """A paginator told its count (the run row's ``trace_seq``): no ``COUNT(*)`` over the
    trace table."""

    def __init__(self, *args: Any, known_count: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._known_count = known_count

    @property
    def count(self) -> int:  # type: ignore[override]
        return self._known_count


@dataclass(frozen=True)
class TraceFilters:
    """Trace browser filters; empty strings mean "any". ``run``: a run id or its start; ``q``:
    the content search (``review.queries.search``), both narrowing to at most ``RUN_MATCHES``
    runs."""

    run: str = ""
    q: str = ""
    event_type: str = ""
    environment_version: str = ""


RUN_MATCHES = 20
"""A partial run id on the trace browser matches at most this many runs (by prefix)."""

EVENT_TYPES_SECONDS = 300
"""How long the event-type choices are kept (seconds): a DISTINCT over the whole trace table is
never run per request."""


@dataclass(frozen=True)
class TraceBrowserPage:
    """One keyset page of trace events, newest first (DESIGN.md section 6.8).

    Attributes:
        events: the rows. ``next_before``: the cursor of the older page (``""`` on the last).
        first: this is the newest page. ``runs``: the run ids a partial run id matched (up to
            ``RUN_MATCHES``; one when it named a run exactly). ``run``: the single run filtered to,
            or None. ``chain``: that run's chain verdict (cached, or fresh with ``verify``).
    """

    events: list[TraceEvent]
    next_before: str
    first: bool
    runs: list[str]
    run: Run | None
    chain: ChainVerdict | None
    capped: bool = False
    """The search named more runs than ``RUN_MATCHES``: the page asks to narrow it."""


def _runs_matching(text: str, user: Any) -> list[str]:
    """Run ids named by ``text`` among the runs ``user`` may see: itself when it is a run id,
    else those starting with it."""
    visible = scope_filter(user=user, queryset=Run.objects.all())
    if visible.filter(run_id=text).exists():
        return [text]
    return list(visible.filter(run_id__startswith=text).order_by("run_id")
                .values_list("run_id", flat=True)[:RUN_MATCHES])


def _newest_of_runs(events: QuerySet[TraceEvent], *, runs: list[str], limit: int) -> list[TraceEvent]:
    """The newest ``limit`` of ``events`` among ``runs`` (at most ``RUN_MATCHES``), newest first,
    reading at most ``limit`` rows of each run through its ``(run, seq)`` index.

    One statement: each run's newest rows (``ORDER BY seq DESC LIMIT``: within a run ``seq`` and
    ``id`` rise together, both assigned under the run's lock) as a sub-select, joined by ``UNION
    ALL`` and ordered by id. Hand-written around the ORM's own compiled parts because Django
    refuses a sliced part of a union on SQLite, and because the obvious ``run_id IN (...) ORDER BY
    id DESC LIMIT`` lets PostgreSQL walk the whole table's id index backwards when its statistics
    are stale or a run is large (measured: 8.4 s on 1M events with 20 old runs)."""
    parts: list[str] = []
    params: list[Any] = []
    for n, run_id in enumerate(runs):
        try:
            sql, part_params = events.filter(run_id=run_id).order_by("-seq")[:limit].query.sql_with_params()
        except EmptyResultSet:  # a scope that sees no tenant: nothing to read
            continue
        parts.append(f"SELECT * FROM ({sql}) AS newest_{n}")
        params.extend(part_params)
    if not parts:
        return []
    quoted = connection.ops.quote_name("id")
    statement = f"{' UNION ALL '.join(parts)} ORDER BY {quoted} DESC LIMIT {int(limit)}"
    return list(TraceEvent.objects.raw(statement, params))


def trace_search(*, user: Any, filters: TraceFilters, before: str = "", verify: bool = False
                 ) -> TraceBrowserPage:
    """Trace events across the runs ``user`` may see (DESIGN.md section 6.6) matching
    ``filters``, newest first, ``EVENTS_PER_PAGE`` at a time before the event id ``before``
    (keyset; no ``COUNT(*)``). A partial run id matches the runs whose id starts with it; the
    content search (``filters.q``, DESIGN.md section 6.8) the runs it names; both at most
    ``RUN_MATCHES`` runs, and both together the runs both name."""
    events = scope_filter(user=user, queryset=TraceEvent.objects.all(),
                          field="run__tenant_id").order_by("-id")
    runs: list[str] = []
    run = None
    chain = None
    capped = False
    if filters.run or filters.q:
        runs = _runs_matching(filters.run, user) if filters.run else []
        if filters.q:
            hits = search_runs(text=filters.q, user=user, limit=RUN_MATCHES)
            named = sorted(hits.run_ids)
            runs = [r for r in runs if r in hits.run_ids] if filters.run else named[:RUN_MATCHES]
            capped = hits.capped or len(named) > RUN_MATCHES
        if len(runs) == 1:
            run = Run.objects.defer("spec").get(run_id=runs[0])
            chain = chain_verdict(run_id=run.run_id, trace_seq=run.trace_seq,
                                  trace_head=run.trace_head, verify=verify)
    if filters.event_type:
        events = events.filter(event_type=filters.event_type)
    if filters.environment_version:
        events = events.filter(environment_version=filters.environment_version)
    if before.isdigit():
        events = events.filter(id__lt=int(before))
    if filters.run or filters.q:
        fetched = _newest_of_runs(events, runs=runs, limit=EVENTS_PER_PAGE + 1)
    else:
        fetched = list(events[: EVENTS_PER_PAGE + 1])
    rows = fetched[:EVENTS_PER_PAGE]
    return TraceBrowserPage(
        events=rows,
        next_before=str(rows[-1].id) if len(fetched) > EVENTS_PER_PAGE else "",
        first=not before.isdigit(),
        runs=runs,
        run=run,
        chain=chain,
        capped=capped,
    )


def trace_event_types() -> list[str]:
    """Distinct trace event types (at most 200), for the browser's filter; cached for
    ``EVENT_TYPES_SECONDS``."""
    types = cache.get("ratchet:trace-event-types")
    if types is None:
        types = list(
            TraceEvent.objects.order_by("event_type")
            .values_list("event_type", flat=True)
            .distinct()[:CHOICES_LIMIT]
        )
        cache.set("ratchet:trace-event-types", types, EVENT_TYPES_SECONDS)
    return types
