"""Waiting, bounded, for a human's approval of a call, then executing that call once (DESIGN.md section 5.12).

An agent whose call is ``waiting_for_approval`` may ask the gateway to wait instead of asking
again later (the MCP server does it when the client accepts its elicitation). Waiting only
reads: :func:`approval_settled` polls the run row until it leaves ``awaiting_approval`` (granted
and signed by the approval service in the dashboard, denied, or expired; DESIGN.md sections 2.1
and 6.2) or the wait ends. The caller then repeats the *same* call id once through
:func:`~runtime.gateway.calls.call_submit`: granted, it executes once; otherwise the answer says
why (still waiting, or the run stopped). Nothing here grants, extends or records an approval.
"""

from __future__ import annotations

from django.conf import settings

from runtime.core.checkpoint import Phase
from runtime.models import Run

MAX_WAIT_SECONDS = 600.0
"""Longest wait the gateway grants a call, whatever ``RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS`` says."""


def approval_wait_seconds() -> float:
    """How long a call may wait for its approval: ``RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS``
    (default 120), bounded to 1..600 seconds."""
    wanted = float(getattr(settings, "RATCHET_GATEWAY_APPROVAL_WAIT_SECONDS", 120.0))
    return min(MAX_WAIT_SECONDS, max(1.0, wanted))


def approval_poll_seconds() -> float:
    """Seconds between two reads of the run row while waiting (``RATCHET_GATEWAY_APPROVAL_POLL_SECONDS``,
    default 0.5, at least 0.05)."""
    return max(0.05, float(getattr(settings, "RATCHET_GATEWAY_APPROVAL_POLL_SECONDS", 0.5)))


def approval_settled(*, run_id: str, generation: int) -> bool:
    """Whether the run moved on from the approval ``generation`` was waiting in (one read of the run row).

    True when the run is no longer ``awaiting_approval`` or committed a newer generation (an
    approval granted, denied or expired, a cancel, a review); False while it still waits.
    A run that vanished is settled too: the repeated call then reports it.
    """
    row = Run.objects.filter(run_id=run_id).values_list("phase", "generation").first()
    return row is None or row[0] != Phase.AWAITING_APPROVAL.value or int(row[1]) != generation


def approval_generation(*, run_id: str) -> int:
    """The run's committed generation now (the one an approval wait starts from; -1: no such run)."""
    found = Run.objects.filter(run_id=run_id).values_list("generation", flat=True).first()
    return int(found) if found is not None else -1
