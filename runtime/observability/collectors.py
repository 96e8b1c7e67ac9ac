"""Families other apps add to ``/metrics`` (DESIGN.md sections 6.10 and 8.1).

The runtime never imports the dashboard app, yet the dashboard's notification outbox belongs in
the same exposition (an outage of the notifications must be visible where the rest is watched).
An app registers a ``prometheus_client`` collector here when it loads; each scrape asks it once.
"""

from __future__ import annotations

from prometheus_client.registry import Collector

_EXTRA: list[Collector] = []


def collector_register(*, collector: Collector) -> None:
    """Add ``collector`` to every later scrape of ``/metrics`` (once, however often it is
    registered; DESIGN.md section 8.1)."""
    if all(type(existing) is not type(collector) for existing in _EXTRA):
        _EXTRA.append(collector)


def collectors_extra() -> tuple[Collector, ...]:
    """The collectors registered by other apps, in registration order."""
    return tuple(_EXTRA)
