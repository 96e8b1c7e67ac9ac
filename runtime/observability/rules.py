"""When a recovery has succeeded or failed, and which events the counters count (DESIGN.md section 8).

A recovery starts with ``recovery.started`` (a worker took over a run whose previous worker died)
and is decided by the first *decisive* event of the run after it:

* a completed write (``write.executed``, ``write.reconciled``) or a commit that ends the run
  ``completed`` or ``cancelled``: the recovery **succeeded**;
* ``recovery.failed`` (the restore failed closed) or a commit that puts the run in
  ``needs_review`` or ``failed``: the recovery **failed**.

Every recovery still open when a decisive event arrives is decided by it: a second crash before
the next write does not decide anything, the run's next decisive event decides both. A recovery
of a run that was already frozen (``needs_review`` before ``recovery.started``) has nothing to
recover and succeeds when its ``recovery.succeeded`` is traced. Pure functions, shared by the
trace scan (``runtime.observability.stats``) and the counters kept as events happen
(``runtime.observability.metrics``), so the two can never disagree on the rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SUCCEEDED = "succeeded"
FAILED = "failed"

FROZEN = "needs_review"
"""Phase of a run frozen for review."""

COMPLETED_WRITES = frozenset({"write.executed", "write.reconciled"})
_FAILING_PHASES = frozenset({"needs_review", "failed"})
_SUCCEEDING_PHASES = frozenset({"completed", "cancelled"})

DURATION_BUCKETS_SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Upper bounds (seconds) of the recovery duration histogram; ``+Inf`` is implied."""


def recovery_decision(event_type: str, payload: Mapping[str, Any]) -> str | None:
    """``SUCCEEDED``, ``FAILED`` or None: what ``event_type`` decides for the run's open recoveries.

    Args:
        event_type: the trace event's type.
        payload: its payload (``checkpoint.committed`` carries the committed ``phase``).
    """
    if event_type in COMPLETED_WRITES:
        return SUCCEEDED
    if event_type == "recovery.failed":
        return FAILED
    if event_type == "checkpoint.committed":
        phase = payload.get("phase")
        if phase in _FAILING_PHASES:
            return FAILED
        if phase in _SUCCEEDING_PHASES:
            return SUCCEEDED
    return None


def duration_bucket(seconds: float) -> str:
    """The histogram bucket label (``le``) a recovery of ``seconds`` falls in (``"+Inf"`` beyond)."""
    for bound in DURATION_BUCKETS_SECONDS:
        if seconds <= bound:
            return f"{bound:g}"
    return "+Inf"
