"""Trace events as the pages show them: a run's timeline (run detail) and the trace evidence
browser across runs, each with the hash-chain verdict from ``trace_verify``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator

from review.queries.runs import CHOICES_LIMIT
from runtime.errors import RunNotFoundError
from runtime.models import TraceEvent
from runtime.trace import ChainReport, trace_verify

EVENTS_PER_PAGE = 50


@dataclass(frozen=True)
class Timeline:
    """A page of a run's trace events (newest first) and whether its whole chain verifies."""

    page: Page
    chain: ChainReport


def trace_timeline(*, run_id: str, page_number: Any = 1) -> Timeline:
    """The run's trace, newest event first, with the hash-chain verdict (``trace_verify``)."""
    chain = trace_verify(run_id=run_id)
    events = TraceEvent.objects.filter(run_id=run_id).order_by("-seq")
    return Timeline(page=Paginator(events, EVENTS_PER_PAGE).get_page(page_number), chain=chain)


@dataclass(frozen=True)
class TraceFilters:
    """Trace browser filters; empty strings mean "any"."""

    run: str = ""
    event_type: str = ""
    environment_version: str = ""


@dataclass(frozen=True)
class TraceBrowserPage:
    """A page of trace events; ``chain`` is the verdict when filtered to one existing run."""

    page: Page
    chain: ChainReport | None


def trace_search(*, filters: TraceFilters, page_number: Any = 1) -> TraceBrowserPage:
    """Trace events across runs matching ``filters``, newest first."""
    events = TraceEvent.objects.order_by("-id")
    if filters.run:
        events = events.filter(run_id=filters.run)
    if filters.event_type:
        events = events.filter(event_type=filters.event_type)
    if filters.environment_version:
        events = events.filter(environment_version=filters.environment_version)
    chain = None
    if filters.run:
        try:
            chain = trace_verify(run_id=filters.run)
        except RunNotFoundError:
            chain = None
    return TraceBrowserPage(
        page=Paginator(events, EVENTS_PER_PAGE).get_page(page_number), chain=chain
    )


def trace_event_types() -> list[str]:
    """Distinct trace event types (at most 200), for the browser's filter."""
    return list(
        TraceEvent.objects.order_by("event_type")
        .values_list("event_type", flat=True)
        .distinct()[:CHOICES_LIMIT]
    )
