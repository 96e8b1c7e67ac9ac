"""Who else hears of a trace event as it is appended (DESIGN.md section 6.10).

The runtime never imports the dashboard app, yet the dashboard's notifications must learn that a
run waits for an approval, froze or failed. So the dashboard registers a listener here when its
app loads, and :func:`trace_append_txn` calls every listener with the event it just wrote,
inside the run's own transaction. A listener must only record what it needs (typically with
``transaction.on_commit``) and return: nothing it does may fail or slow the run, so an exception
a listener raises is logged and swallowed here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppendedEvent:
    """One trace event as appended: its run, its position in the run's trace, type and payload."""

    run_id: str
    seq: int
    event_type: str
    payload: dict[str, Any]


TraceListener = Callable[[AppendedEvent], None]

_LISTENERS: list[TraceListener] = []


def trace_listener_register(*, listener: TraceListener) -> None:
    """Call ``listener`` for each trace event appended from now on (once per listener, however
    often it is registered; DESIGN.md section 6.10)."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)


def trace_listener_remove(*, listener: TraceListener) -> None:
    """Stop calling ``listener`` (a no-op when it was not registered)."""
    if listener in _LISTENERS:
        _LISTENERS.remove(listener)


def trace_listeners_notify(*, event: AppendedEvent) -> None:
    """Hand ``event`` to every registered listener; a failing listener is logged, never raised,
    so a notification problem cannot fail the run's commit (DESIGN.md section 6.10)."""
    for listener in tuple(_LISTENERS):
        try:
            listener(event)
        except Exception:  # a listener's bug must not fail the run that traced the event
            log.exception("trace listener %r failed on %s of run %s", listener, event.event_type, event.run_id)
