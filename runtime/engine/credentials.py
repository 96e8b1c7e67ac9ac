"""Live credentials: before a resume executes anything, the adapter re-checks its credential.

DESIGN.md section 5.9: "before recovery, check whether approvals expired, resource versions
changed, credentials are still valid". An adapter that holds a credential (the HTTP adapter's
bearer token) offers ``credentials_check()``, a cheap authenticated probe. An expired or revoked
credential freezes the run for a human with a clear reason, instead of failing in the middle of
a write; a service that cannot be reached right now is retried later like any other step.
"""

from __future__ import annotations

from runtime.checkpoints.session import RunSession
from runtime.core.checkpoint import TERMINAL_PHASES, Phase, StopReason
from runtime.core.statemachine import Event
from runtime.engine.freeze import run_freeze
from runtime.errors import AdapterError


def credentials_recheck(session: RunSession) -> None:
    """Probe the adapter's credential, if it has one; freeze the run when it is no longer valid.

    Raises:
        AdapterError: a retryable failure of the probe (the service is unreachable): try later.
        LeaseLostError / StaleGenerationError: from the freeze's commit; another worker took over.
    """
    check = getattr(session.adapter, "credentials_check", None)
    if check is None or session.state.phase in TERMINAL_PHASES or session.state.phase == Phase.NEEDS_REVIEW:
        return
    try:
        check()
    except AdapterError as exc:
        if exc.retryable:
            raise
        run_freeze(session, Event.ADAPTER_REFUSED, StopReason.ADAPTER_REFUSED,
                   f"the adapter's credential is not valid before resuming, nothing was executed: "
                   f"{type(exc).__name__}: {exc.message}")
