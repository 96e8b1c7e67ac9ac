"""A run this worker cannot drive because its code is missing here: blocked, not failed.

A worker that cannot import a plug-in the run names (installed after the worker started, or not
on this machine), or that runs another version than the run pinned (DESIGN.md section 8.4), has
learnt something about *itself*, not about the run: nothing was restored wrongly and nothing was
lost. The run is therefore traced ``run.blocked`` with the reason and what fixes it, and stays in
its phase; the recovery it may be in stays undecided, so the recovery success rate, ``/metrics``
and the admission gate never count a worker's missing code as a failed recovery (DESIGN.md
section 5.14). A worker that has the code takes the run on its next delivery.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError

from runtime.errors import PluginLoadError, PluginNotFoundError, PluginVersionMismatchError, RatchetError
from runtime.evidence.trace import trace_append

logger = logging.getLogger(__name__)

RUN_BLOCKED = "run.blocked"
"""The trace event of a run a worker could not drive for want of its code."""

BLOCKING_ERRORS: tuple[type[RatchetError], ...] = (PluginNotFoundError, PluginLoadError,
                                                   PluginVersionMismatchError)
"""Errors that say the worker lacks the run's code, not that the run is broken."""

RESTART_HINT = ("install the plug-in (the version the run pinned) where the workers run and restart "
                "them: a worker reads the installed plug-ins once, when it starts")
"""What an operator does about a blocked run; shown with the reason on the dashboard and CLI."""


def run_block(*, run_id: str, worker: str, error: RatchetError) -> None:
    """Trace ``run.blocked`` for ``run_id``: ``worker`` lacks the code ``error`` names.

    Args:
        run_id: the run.
        worker: the worker id that could not drive it.
        error: one of :data:`BLOCKING_ERRORS` (its class name and message are kept; they hold
            plug-in names and versions, never key material).

    Never raises for a database that cannot take the event: the error itself still reaches the
    caller, which is what matters; the miss is logged.
    """
    payload = {"worker": worker, "error": type(error).__name__, "message": str(error)[:500],
               "plugin": error.context.get("plugin"), "hint": RESTART_HINT}
    try:
        trace_append(run_id=run_id, event_type=RUN_BLOCKED, payload=payload)
    except (RatchetError, DatabaseError) as exc:
        logger.warning("run %s: run.blocked not traced: %s", run_id, type(exc).__name__)
