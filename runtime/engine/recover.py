"""Recovery on resume: accept only the checkpointed environment or the pending write's post-state.

A worker that takes a run over re-observes the environment before anything else (DESIGN.md
section 5): the state the checkpoint recorded, or the single post-state its pending write
produces, is the only environment it accepts; same version with different content, the same
content on another instance and multi-step drift all freeze the run for review. A run waiting for
an approval whose write already committed before a crash only reconciles the receipt.
"""

from __future__ import annotations

from runtime.adapters.fence import adapter_fence_advance
from runtime.checkpoints.session import RunSession, observation_json, observation_matches
from runtime.core.checkpoint import TERMINAL_PHASES, Phase, StopReason
from runtime.core.statemachine import Event
from runtime.engine.freeze import run_freeze, run_freeze_fenced
from runtime.engine.settle import receipt_settle
from runtime.errors import EnvironmentIdentityError, FencingTokenError


def environment_recover(session: RunSession) -> None:
    """Re-observe and accept only the checkpointed state or the single pending write's post-state.

    DESIGN.md section 5: same version with different content, the same content on another
    instance, and multi-step drift all fail closed (freeze for review).

    A new holder first raises the adapter's fence to its token (section 4.6), so an older
    holder still on its way to a write is refused from now on, whatever this session does next
    (a cancel, a look-up); a refusal of our own token freezes the run. The observation checks
    that the directory is the registered one (section 5.4): a byte copy or a move freezes it.

    Raises:
        AdapterError: the environment cannot be observed.
        LeaseLostError / StaleGenerationError: from a freeze's commit; another worker took over.
    """
    state = session.state
    if state.phase in TERMINAL_PHASES or state.phase == Phase.NEEDS_REVIEW:
        return
    try:
        _environment_recover(session)
    except FencingTokenError as exc:
        run_freeze_fenced(session, exc)


def _environment_recover(session: RunSession) -> None:
    state = session.state
    try:
        obs = session.adapter.observe()
    except EnvironmentIdentityError as exc:
        run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                   f"EnvironmentIdentityError: {exc}", extra={"identity": exc.context})
        return
    adapter_fence_advance(session.adapter, session.lease.lease_version)
    ref = state.environment
    if obs.instance_id != ref.instance_id:
        run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                   f"environment instance changed: checkpoint has {ref.instance_id}, observed {obs.instance_id}",
                   extra={"observed": observation_json(obs)})
        return
    if observation_matches(obs, ref):
        return
    pending = state.pending
    if pending is not None and obs.state_fingerprint == pending.expected_post_fingerprint:
        return  # the single pending write landed; execution will reconcile its receipt
    if (pending is not None and state.phase == Phase.PENDING
            and session.adapter.lookup_receipt(pending.idempotency_key) is not None):
        # The adapter holds a receipt under the pending key: execution settles it first, so a
        # same-key/different-intent write freezes as receipt_conflict with the full receipt kept
        # (DESIGN.md section 6) instead of as anonymous drift; any other drift still freezes there.
        return
    if obs.version == ref.version:
        detail = (f"environment content changed at the same version {ref.version}: "
                  f"fingerprint {ref.state_fingerprint} -> {obs.state_fingerprint}")
    else:
        detail = (f"environment moved from {ref.version} to {obs.version} in a way no single pending "
                  "write explains")
    run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT, detail,
               extra={"observed": observation_json(obs)})


def waiting_reconcile(session: RunSession) -> None:
    """A run waiting for approval whose write already committed (before a crash) only reconciles."""
    pending = session.state.pending
    if session.state.phase != Phase.AWAITING_APPROVAL or pending is None:
        return
    try:
        receipt = session.adapter.lookup_receipt(pending.idempotency_key)
    except FencingTokenError as exc:
        run_freeze_fenced(session, exc)
        return
    if receipt is not None:
        receipt_settle(session, receipt, reconciled=True)
