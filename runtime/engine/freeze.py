"""Stopping a run: freeze it for review with a case that keeps the evidence, or stop it for a reason.

A freeze (``needs_review``) is how the engine fails closed (DESIGN.md section 6): anything it
cannot explain -- drift, a conflicting or untrusted receipt, an adapter refusal, an unknown
outcome -- stops the run with a review case holding the pending intent, both digests, the full
receipt and its fingerprint and the environment, and a human decides. A stop ends the run with
a stop reason and an event (budget exhausted, policy violation, cancelled).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from runtime.checkpoints.cases import case_open, review_case_id
from runtime.checkpoints.session import RunSession, session_commit
from runtime.core.checkpoint import Receipt, ReviewCaseRef, StopReason
from runtime.core.statemachine import Event, transition
from runtime.errors import FencingTokenError
from runtime.evidence.trace import trace_append
from runtime.models import TraceEvent
from runtime.observability.metrics import metrics_fencing_rejection_count
from runtime.ownership.leases import lease_check

log = logging.getLogger("runtime.engine")


def run_freeze(session: RunSession, event: Event, reason: StopReason, detail: str, *,
               receipt: Receipt | None = None, extra: dict[str, Any] | None = None) -> None:
    """Freeze the run in needs_review with a review case that keeps all the evidence (section 6).

    Args:
        event: the state machine event that freezes (``ENVIRONMENT_DRIFT``, ``RECEIPT_DRIFT``...).
        reason: the stop reason and the case's reason.
        detail: what a human reads first (at most 4000 characters are kept on the state).
        receipt: the receipt in question, kept in full with its fingerprint.
        extra: more payload for the ``review.opened`` event; its ``observed`` entry goes on the case.

    Raises:
        LeaseLostError / StaleGenerationError: from the commit; another worker took over.
    """
    state = session.state
    pending = state.pending
    case = ReviewCaseRef(
        # Derived from the generation this freeze commits, so a crash before the commit and a
        # second freeze after recovery open the same case instead of two.
        case_id=review_case_id(run_id=session.run_id, generation=session.generation + 1),
        reason=reason,
        idempotency_key=pending.idempotency_key if pending else None,
        intent_digest=pending.intent_digest if pending else None,
        receipt=receipt,
        receipt_fingerprint=receipt.fingerprint() if receipt else None,
        environment_version=state.environment.version,
        opened_at=datetime.now(UTC),
    )
    state.phase = transition(state.phase, event)
    state.stop_reason = reason
    state.stop_detail = detail[:4000]
    state.review_cases.append(case)
    payload: dict[str, Any] = {
        "case_id": case.case_id,
        "reason": reason.value,
        "detail": detail,
        "pending": pending.model_dump(mode="json") if pending else None,
        "receipt": receipt.model_dump(mode="json") if receipt else None,
        "receipt_fingerprint": case.receipt_fingerprint,
        "environment": state.environment.model_dump(mode="json"),
        **(extra or {}),
    }
    case_open(run_id=session.run_id, case=case, detail=detail, pending=payload["pending"],
              receipt=payload["receipt"], environment=payload["environment"],
              observed=(extra or {}).get("observed"))
    session_commit(session, ("review.opened", payload))
    log.warning("run %s frozen for review: %s (%s)", session.run_id, reason.value, detail)


def run_stop(session: RunSession, event: Event, reason: StopReason, detail: str, event_type: str,
             payload: dict[str, Any] | None = None) -> None:
    """Move the run on by ``event`` with ``reason`` and commit ``event_type`` with the reason,
    ``detail`` and ``payload``.

    Raises:
        LeaseLostError / StaleGenerationError: from the commit; another worker took over.
    """
    session.state.phase = transition(session.state.phase, event)
    session.state.stop_reason = reason
    session.state.stop_detail = detail[:4000]
    session_commit(session, (event_type, {"reason": reason.value, "detail": detail, **(payload or {})}))


def run_freeze_fenced(session: RunSession, exc: FencingTokenError) -> None:
    """The adapter refused this session's fencing token: trace and count the refusal, then
    freeze the run with a review case (DESIGN.md section 4.6) instead of leaving it pending.

    The ``fence.refused`` event is appended on its own (it carries ``refusals``, the run's count
    of them so far) and the ``fencing_rejections`` metric counted, so both are kept even when the
    freeze cannot commit. When this worker's lease
    was taken over, the freeze's fenced commit raises and the newer holder carries on; when the
    lease is still ours, something else on the environment holds a newer token (another run, or
    a fence the control plane never issued) and a human decides.

    Raises:
        LeaseLostError / StaleGenerationError: the lease is gone; stop.
    """
    refusals = TraceEvent.objects.filter(run_id=session.run_id, event_type="fence.refused").count() + 1
    fencing = {"fencing_token": exc.context.get("fencing_token", session.lease.lease_version),
               "newest_seen": exc.context.get("newest_seen"), "worker": session.worker,
               "idempotency_key": exc.context.get("idempotency_key") or None, "refusals": refusals}
    trace_append(run_id=session.run_id, event_type="fence.refused", payload=fencing)
    metrics_fencing_rejection_count(run_id=session.run_id)
    lease_check(lease=session.lease)  # a taken-over worker opens no case: the new holder decides
    log.warning("run %s: the adapter refused fencing token %s (newest seen %s)", session.run_id,
                fencing["fencing_token"], fencing["newest_seen"])
    run_freeze(session, Event.ADAPTER_REFUSED, StopReason.ADAPTER_REFUSED, f"FencingTokenError: {exc}",
               extra={"fencing": fencing})
