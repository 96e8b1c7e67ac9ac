"""What the engine's spans say about a run: step attributes and the recovery span (DESIGN.md section 8.6).

The spans themselves are made by the core seam (``runtime.core.tracing``); this module only
reads a :class:`RunSession` into attributes, and is called only while tracing is on.
"""

from __future__ import annotations

import time
from typing import Any

from runtime.checkpoints.session import RunSession
from runtime.core.tracing import recovery_span_emit, tracing_enabled
from runtime.ownership.leases import Lease


def step_attributes(session: RunSession) -> dict[str, Any]:
    """The run's position as span attributes: run id, generation, phase, adapter, and the pending
    write's idempotency key, action kind and attempt count when a write is in flight."""
    state = session.state
    pending = state.pending
    return {
        "ratchet.run_id": session.run_id,
        "ratchet.generation": session.generation,
        "ratchet.phase": state.phase.value,
        "ratchet.adapter": session.spec.environment.adapter,
        "ratchet.worker": session.worker,
        "ratchet.idempotency_key": pending.idempotency_key if pending is not None else None,
        "ratchet.action": pending.action.kind if pending is not None else None,
        "ratchet.cursor": state.cursor,
    }


def step_outcome(session: RunSession) -> dict[str, Any]:
    """Where a step left the run (``ratchet.*.after``), set on the step span when it ends."""
    pending = session.state.pending
    return {
        "ratchet.generation.after": session.generation,
        "ratchet.phase.after": session.state.phase.value,
        "ratchet.idempotency_key.after": pending.idempotency_key if pending is not None else None,
    }


class RecoveryTrace:
    """The ``ratchet.recovery`` span of one takeover: opened when the lease is taken from a holder
    that never released it, emitted once restore and recovery have run (or failed).

    Args:
        lease: the lease just acquired; ``previous_owner`` non-empty means a recovery.
    """

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.started_ns = time.time_ns()
        self.interrupted: dict[str, Any] = {}
        self.active = bool(lease.previous_owner) and tracing_enabled()

    def restored(self, session: RunSession) -> None:
        """Note the restored checkpoint: the last one the killed holder committed."""
        if self.active:
            self.interrupted = step_attributes(session)

    def emit(self, *, error: BaseException | None = None) -> None:
        """Emit the span (status ERROR: the previous holder's step never finished)."""
        if not self.active:
            return
        self.active = False
        where = self.interrupted
        description = f"worker {self.lease.previous_owner} stopped without releasing the lease"
        if where:
            description += f" at generation {where['ratchet.generation']} in phase {where['ratchet.phase']}"
            if where.get("ratchet.idempotency_key"):
                description += f" with write {where['ratchet.idempotency_key']} in flight"
        if error is not None:
            description += f"; recovery failed: {type(error).__name__}"
        attributes = {**where, "ratchet.worker": self.lease.worker,
                      "ratchet.recovery.previous_owner": self.lease.previous_owner,
                      "ratchet.recovery.lease_version": self.lease.lease_version,
                      "ratchet.recovery.outcome": "failed" if error is not None else "recovered"}
        recovery_span_emit(run_id=self.lease.run_id, description=description, start_time_ns=self.started_ns,
                           attributes=attributes)
