"""Settling a receipt: check it against the pending intent, record it, advance the run.

The last two rows of the crash-window table (DESIGN.md section 5) meet here: a receipt the
adapter returned or already held is checked against the pending intent, the approval it must
bind (DESIGN.md section 6), the runtime's cache and the environment's single post-state, then
cached, recorded as an executed write and committed with the next observation. Anything that
does not fit freezes the run for review with the receipt kept in full.
"""

from __future__ import annotations

from runtime.checkpoints.approval_checks import receipt_trust_problem
from runtime.checkpoints.receipts import receipt_cache_get, receipt_cache_write
from runtime.checkpoints.session import RunSession, observation_json, session_commit, store_observation
from runtime.core.checkpoint import ExecutedWrite, Receipt, StopReason
from runtime.core.crashpoints import crash_point, register
from runtime.core.idempotency import compare_receipts
from runtime.core.ledger import state_ledger
from runtime.core.statemachine import Event, transition
from runtime.engine.freeze import run_freeze
from runtime.engine.propose import CP_AFTER_INTENT, intent_fold
from runtime.errors import EngineError

CP_AFTER_CACHE = register("engine.after_receipt_cache",
                          "receipt checked; its cache row and ledger entry wait for the receipt commit")
CP_AFTER_STEP = register("engine.after_step_commit", "write recorded and state advanced")


def receipt_settle(session: RunSession, receipt: Receipt, *, reconciled: bool, fold: bool = True,
                   cache_empty: bool = False) -> None:
    """Check a receipt against the pending intent and the cache, then record it and advance.

    Args:
        receipt: the adapter's receipt for the pending write's idempotency key.
        reconciled: True when the adapter already held it (found by querying the key after a
            crash, a timeout or an approval), False when this session's execute returned it.
        fold: whether the next write may be proposed into the same commit (one commit per write,
            DESIGN.md section 4.13); False where nothing new may be proposed -- an operator's
            cancel, a person's approval decision -- so the receipt commits alone.
        cache_empty: True when the caller read the receipt cache for this key in this step, under
            this lease, just before the adapter call and found no row, so it is not read again:
            no other worker writes the key's row while the lease holds, and the receipt commit's
            own INSERT of the row rolls back to the checking path if a row is there after all
            (``runtime.checkpoints.receipts.receipt_cache_write``).

    Raises:
        EngineError: there is no pending write to settle.
        KeyQuarantinedError: the key was quarantined by a reviewer's replan.
        LeaseLostError / StaleGenerationError: from the commit; another worker took over.
    """
    state = session.state
    pending = state.pending
    if pending is None:
        raise EngineError("a receipt arrived without a pending action", run_id=session.run_id)
    if receipt.idempotency_key != pending.idempotency_key or receipt.intent_digest != pending.intent_digest:
        run_freeze(session, Event.RECEIPT_CONFLICT, StopReason.RECEIPT_CONFLICT,
                   f"the adapter holds a receipt for key {pending.idempotency_key} with intent "
                   f"{receipt.intent_digest}, not {pending.intent_digest}", receipt=receipt)
        return
    untrusted = receipt_trust_problem(pending=pending, receipt=receipt)
    if untrusted is not None:
        run_freeze(session, Event.RECEIPT_DRIFT, StopReason.UNTRUSTED_RECEIPT, untrusted, receipt=receipt)
        return
    cached = None if cache_empty else receipt_cache_get(idempotency_key=pending.idempotency_key)
    if cached is not None:
        comparison = compare_receipts(cached, receipt)
        if not comparison.same:
            run_freeze(session, Event.RECEIPT_DRIFT, StopReason.RECEIPT_DRIFT,
                       "cached and authoritative receipts differ in: " + ", ".join(comparison.drifted_fields),
                       receipt=receipt, extra={"cached_receipt": cached.model_dump(mode="json")})
            return
    obs = session.adapter.observe()
    if (obs.instance_id != pending.pre_state.instance_id
            or obs.version != receipt.environment_version_after
            or obs.state_fingerprint != pending.expected_post_fingerprint):
        run_freeze(session, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                   "after the write the environment is not the single post-state the write produces",
                   receipt=receipt, extra={"observed": observation_json(obs)})
        return
    if cached is None:
        # Written by the receipt commit's own transaction (DESIGN.md section 4.3): one durable
        # transaction for the cache row, the ledger entry and the checkpoint.
        session.within_commit.append(receipt_cache_write(run_id=session.run_id, receipt=receipt))
    crash_point(CP_AFTER_CACHE)
    fingerprint = receipt.fingerprint()  # once: the receipt never changes after this (section 3.1)
    ledger = state_ledger(state)
    ledger.record_executed(ExecutedWrite(
        idempotency_key=pending.idempotency_key, intent_digest=pending.intent_digest, cursor=pending.cursor,
        receipt=receipt, receipt_fingerprint=fingerprint,
        result_summary=f"{pending.action.kind} {pending.action.target}".strip()[:2000], reconciled=reconciled,
    ))
    if pending.approval is not None and not ledger.nonce_consumed(pending.approval.nonce):
        ledger.consume_nonce(pending.approval.nonce)
    state.pending = None
    state.cursor += 1
    state.usage.steps += 1
    state.environment = store_observation(obs, observation_version=state.environment.observation_version + 1,
                                          adapter_generation=session.lease.lease_version,
                                          row_writes=session.within_commit)
    state.phase = transition(state.phase, Event.RECONCILED if reconciled else Event.EXECUTED)
    state.stop_reason = None
    state.stop_detail = ""
    # The next write's intent rides in the same checkpoint when the planner can say it at once
    # (DESIGN.md section 4.13): one commit per write in steady state.
    following = intent_fold(session, obs) if fold else []
    # The receipt itself is in the ledger entry written by this same commit (and in the cache
    # row); the event names it by fingerprint instead of a third copy (DESIGN.md section 4.14).
    session_commit(session, ("write.reconciled" if reconciled else "write.executed", {
        "idempotency_key": pending.idempotency_key, "intent_digest": pending.intent_digest,
        "receipt_id": receipt.receipt_id, "adapter_version": receipt.adapter_version,
        "receipt_fingerprint": fingerprint, "environment_version": obs.version,
    }), *following)
    crash_point(CP_AFTER_STEP)
    if following:
        crash_point(CP_AFTER_INTENT)
