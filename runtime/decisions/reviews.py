"""Review cases and signed reviewer decisions (DESIGN.md section 6).

Every ``needs_review`` freeze opens a case (``runtime.checkpoints.cases.case_open``, called by the engine)
that keeps the pending intent, both digests, the full receipt and its fingerprint, the
environment version, the reason and a trace excerpt. A reviewer resolves it with ``replan`` or
``abort``, signed (Ed25519) under the reviewer trust root -- with the reviewer role's key held by
the dashboard, or with a person's own key file on the command line -- and bound to task, run,
policy, action, key, both digests, the receipt fingerprint, the environment and a one-time nonce
(``decision_prepare`` -> ``decision_sign_for``). A decision carries a signed ``expires_at``
(``RATCHET_DECISION_SECONDS`` after it was signed by the database clock) and is refused
(:class:`~runtime.errors.DecisionExpiredError`, traced) once the database clock reaches it; one
signed before decisions carried an expiry is never applied (DESIGN.md section 6.3).

``case_decide`` applies a signed decision under the run's lease: it re-reads the authoritative
receipt from the adapter and re-observes the environment, and keeps the run frozen -- recording
the refusal in the trace -- on an unknown signer, a tampered signature, any bound field that
differs, a reused nonce, receipt drift or a changed environment. The signed checkpoint is the
commit point; the case row is updated after it and repaired from the checkpoint if a crash
came in between (``runtime.checkpoints.cases.case_sync``). A replan's key quarantine is written inside the
checkpoint's commit transaction, so a replan that loses the race to an abort quarantines nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction

import runtime.workers.dispatch
from runtime.checkpoints.cases import case_sync
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.receipts import key_quarantine
from runtime.checkpoints.session import (
    adapter_for_run,
    person_worker_id,
    run_session,
    session_commit,
    store_observation,
)
from runtime.core.checkpoint import (
    DecisionKind,
    Phase,
    ReviewCaseRef,
    ReviewCaseStatus,
    RunState,
    SignedDecision,
    StopReason,
)
from runtime.core.crashpoints import crash_point, register
from runtime.core.evidence import (
    decision_expires_at,
    decision_mismatch,
    decision_sign,
    decision_verify,
    reviewer_name_problem,
)
from runtime.core.ledger import state_ledger
from runtime.core.passkey_evidence import passkey_problem
from runtime.core.signing import Keyring, TrustRoot
from runtime.core.statemachine import Event, transition
from runtime.database.clock import db_now
from runtime.errors import (
    BadSignatureError,
    DecisionExpiredError,
    DecisionRefusedError,
    LeaseHeldError,
    ReviewCaseNotFoundError,
    UnknownKeyError,
)
from runtime.evidence.trace import trace_append
from runtime.keys import keyring_for, reviewer_names, signer_for
from runtime.models import CaseStatus, ReviewCase

FUTURE_STAMP_SECONDS = 300.0
"""How far (seconds) a decision's ``issued_at`` may lie ahead of the database clock: decisions are
stamped with that clock, so only a forged or badly skewed stamp is further ahead."""

CP_AFTER_DECISION_COMMIT = register("review.after_decision_commit",
                                    "decision applied in the checkpoint, case row not updated yet")
CP_BEFORE_DECISION_COMMIT = register("review.before_decision_commit",
                                     "decision checked, nothing applied yet")


def _find_ref(state: RunState, case_id: str) -> ReviewCaseRef:
    for ref in state.review_cases:
        if ref.case_id == case_id:
            return ref
    raise ReviewCaseNotFoundError(case_id=case_id, run_id=state.identity.run_id)


def _binding(state: RunState, ref: ReviewCaseRef, observation: Any) -> dict[str, Any]:
    pending = state.pending if ref.idempotency_key and state.pending is not None \
        and state.pending.idempotency_key == ref.idempotency_key else None
    ident = state.identity
    return {
        "case_id": ref.case_id,
        "task_id": ident.task_id,
        "task_version": ident.task_version,
        "run_id": ident.run_id,
        "policy_id": ident.policy_id,
        "policy_version": ident.policy_version,
        "action_kind": pending.action.kind if pending else None,
        "action_target": pending.action.target if pending else None,
        "idempotency_key": ref.idempotency_key,
        "pending_intent_digest": ref.intent_digest,
        "receipt_intent_digest": ref.receipt.intent_digest if ref.receipt else None,
        "receipt_fingerprint": ref.receipt_fingerprint,
        "environment_instance_id": observation.instance_id,
        "environment_version": observation.version,
        "environment_fingerprint": observation.state_fingerprint,
    }


def _open_for_reading(case_id: str) -> tuple[ReviewCase, RunState, Any]:
    row = ReviewCase.objects.select_related("run").filter(case_id=case_id).first()
    if row is None:
        raise ReviewCaseNotFoundError(case_id=case_id)
    state = checkpoint_verify(run_id=row.run_id).state
    return row, state, adapter_for_run(row.run)


def decision_prepare(*, case_id: str) -> dict[str, Any]:
    """The exact fields a reviewer signs for ``case_id``: taken from the committed checkpoint and
    the environment as observed now (what the reviewer is looking at).

    Raises:
        ReviewCaseNotFoundError; CheckpointError subclasses if the checkpoint fails to verify.
    """
    _, state, adapter = _open_for_reading(case_id)
    ref = _find_ref(state, case_id)
    return _binding(state, ref, adapter.observe())


def decision_binding_recorded(*, case_id: str) -> dict[str, Any]:
    """The fields a decision on ``case_id`` binds, as the verified committed checkpoint records
    them, without opening the run's adapter: the environment fields are those checkpointed, not
    observed now (DESIGN.md section 6.11). For reading and checking a case where the run's
    plug-in cannot be loaded; a decision is still signed over :func:`decision_prepare`.

    Raises:
        ReviewCaseNotFoundError; CheckpointError subclasses if the checkpoint fails to verify.
    """
    row = ReviewCase.objects.filter(case_id=case_id).only("run_id").first()
    if row is None:
        raise ReviewCaseNotFoundError(case_id=case_id)
    state = checkpoint_verify(run_id=row.run_id).state
    return _binding(state, _find_ref(state, case_id), state.environment)


def decision_sign_for(*, case_id: str, reviewer: str, decision: DecisionKind | str,
                      binding: dict[str, Any] | None = None, keyring: Keyring | None = None) -> SignedDecision:
    """Sign ``decision`` for ``case_id`` as ``reviewer`` under the reviewer trust root, stamped
    with the database clock (DESIGN.md section 6.3).

    Args:
        reviewer: the signed-in reviewer (dashboard) or the name bound to ``keyring``'s key.
        binding: the fields the reviewer was shown (from :func:`decision_prepare`); prepared now
            when omitted.
        keyring: a person's own private reviewer key (``runtime.keys.reviewer_key_load``); None:
            the reviewer role's private key this process holds.

    Raises:
        ReviewCaseNotFoundError; KeyringError if this process holds no private reviewer key.
    """
    fields = dict(binding) if binding is not None else decision_prepare(case_id=case_id)
    fields.update({"reviewer": reviewer, "decision": DecisionKind(decision), "issued_at": db_now()})
    fields.pop("expires_at", None)  # always issued_at + the configured validity, never the caller's
    return decision_sign(keyring=keyring or signer_for(TrustRoot.REVIEWER), binding=fields,
                         validity_seconds=settings.RATCHET_DECISION_SECONDS)


@dataclass(frozen=True)
class DecisionOutcome:
    """Result of :func:`case_decide`: ``applied`` or refused with a reason (run stays frozen)."""

    case_id: str
    run_id: str
    applied: bool
    decision: str
    phase: str
    reason: str = ""
    already_applied: bool = False
    expired: bool = False


def case_decide(*, decision: SignedDecision, worker: str | None = None) -> DecisionOutcome:
    """Apply a signed reviewer decision to its case, or refuse it and keep the run frozen.

    Args:
        decision: the signed decision (its ``case_id`` names the case).
        worker: the lease holder to apply it as; default a name of this call alone
            (``person_worker_id``: ``reviewer:<reviewer>:<random>``).

    Returns:
        :class:`DecisionOutcome`. Refusals are returned (and traced as ``review.refused``), not
        raised, so callers can show the reason; use :meth:`raise_if_refused` style handling in CLIs.

    Raises:
        ReviewCaseNotFoundError: unknown case id.
        LeaseHeldError: a worker is busy with the run; try again shortly.
    """
    with transaction.atomic():
        row = ReviewCase.objects.select_for_update().filter(case_id=decision.case_id).first()
        if row is None:
            raise ReviewCaseNotFoundError(case_id=decision.case_id)
        run_id = row.run_id
    kind = decision.decision

    try:
        with run_session(run_id=run_id,
                         worker=worker or person_worker_id(role="reviewer", person=decision.reviewer)) as ctx:
            state = ctx.state
            ref = _find_ref(state, decision.case_id)

            def refuse(reason: str, *, expired: bool = False) -> DecisionOutcome:
                trace_append(run_id=run_id, event_type="review.refused",
                             payload={"case_id": decision.case_id, "decision": kind.value,
                                      "reviewer": decision.reviewer, "nonce": decision.nonce,
                                      "key_id": decision.key_id, "reason": reason,
                                      **({"expired": True} if expired else {})})
                return DecisionOutcome(decision.case_id, run_id, False, kind.value, state.phase.value, reason,
                                       expired=expired)

            if ref.status != ReviewCaseStatus.OPEN:
                same = ref.decision is not None and ref.decision.nonce == decision.nonce
                if same and ref.decision.mac == decision.mac:
                    case_sync(run_id=run_id, state=state)
                    return DecisionOutcome(decision.case_id, run_id, True, kind.value, state.phase.value,
                                           already_applied=True)
                return refuse(f"case is already {ref.status.value}")
            try:
                decision_verify(decision, keyring_for(TrustRoot.REVIEWER))
            except UnknownKeyError:
                return refuse(f"unknown signer: key id {decision.key_id} is not in the reviewer trust root")
            except BadSignatureError:
                return refuse("tampered decision: the signature does not verify")
            passkey = passkey_problem(decision)
            if passkey:
                return refuse(f"passkey evidence: {passkey}")
            misnamed = reviewer_name_problem(decision, reviewer_names())
            if misnamed:
                return refuse(f"wrong reviewer: {misnamed}")
            now = db_now()
            expires_at = decision_expires_at(decision, validity_seconds=settings.RATCHET_DECISION_SECONDS)
            if expires_at is None:
                return refuse("expired decision: it carries no signed expiry (signed before decisions expired)",
                              expired=True)
            if expires_at <= now:
                return refuse(f"expired decision: its validity ended at {expires_at.isoformat()} by the database clock",
                              expired=True)
            if decision.issued_at > now + timedelta(seconds=FUTURE_STAMP_SECONDS):
                return refuse("decision is stamped in the future by the database clock")
            if state_ledger(state).nonce_consumed(decision.nonce):
                return refuse("nonce already used: a decision can be applied once")
            if state.phase != Phase.NEEDS_REVIEW:
                return refuse(f"run is {state.phase.value}, not needs_review")
            observed = ctx.adapter.observe()
            field = decision_mismatch(decision, _binding(state, ref, observed))
            if field is not None:
                what = "environment changed after signing" if field.startswith("environment_") else "wrong binding"
                return refuse(f"{what}: bound {field} differs from the run as it is now")
            # Re-read the authoritative receipt: any drift since signing keeps the run frozen.
            if ref.idempotency_key:
                current = ctx.adapter.lookup_receipt(ref.idempotency_key)
                now_fp = current.fingerprint() if current is not None else None
                if now_fp != ref.receipt_fingerprint:
                    return refuse("receipt drift: the adapter's receipt is not the one the reviewer signed for")

            crash_point(CP_BEFORE_DECISION_COMMIT)
            sealed = {
                "pending": state.pending.model_dump(mode="json") if state.pending else None,
                "receipt": ref.receipt.model_dump(mode="json") if ref.receipt else None,
                "decision": decision.model_dump(mode="json"),
            }
            ref.decision = decision
            state_ledger(state).consume_nonce(decision.nonce)
            if kind == DecisionKind.REPLAN:
                if ref.idempotency_key and state.pending is not None:
                    # Inside the commit's transaction: if this replan loses to an abort, the commit
                    # fails and the key stays usable (DESIGN.md section 6.3).
                    quarantine = {"run_id": run_id, "idempotency_key": ref.idempotency_key,
                                  "intent_digest": state.pending.intent_digest,
                                  "reason": f"replan by {decision.reviewer} on {decision.case_id}"}
                    ctx.within_commit.append(lambda: key_quarantine(**quarantine))
                    state_ledger(state).quarantine_key(ref.idempotency_key)
                ref.status = ReviewCaseStatus.REPLANNED
                state.pending = None
                state.replan_epoch += 1
                state.environment = _fresh_ref(observed, state)
                state.phase = transition(state.phase, Event.REVIEW_REPLAN)
                state.stop_reason = None
                state.stop_detail = ""
                event = "review.replanned"
            else:
                ref.status = ReviewCaseStatus.ABORTED
                state.phase = transition(state.phase, Event.REVIEW_ABORT)
                state.stop_reason = StopReason.ABORTED_BY_REVIEWER
                state.stop_detail = f"aborted by {decision.reviewer} on {decision.case_id}"
                event = "review.aborted"
            session_commit(ctx, (event, {"case_id": decision.case_id, "reviewer": decision.reviewer,
                                         "sealed": sealed, "quarantined_key": ref.idempotency_key
                                         if kind == DecisionKind.REPLAN else None}))
            crash_point(CP_AFTER_DECISION_COMMIT)
            ReviewCase.objects.filter(case_id=decision.case_id, status=CaseStatus.OPEN).update(
                status=ref.status.value, sealed=sealed, decision=decision.model_dump(mode="json"),
                decided_by=decision.reviewer, decided_at=db_now(),
            )
            outcome = DecisionOutcome(decision.case_id, run_id, True, kind.value, state.phase.value)
    except LeaseHeldError as exc:  # only the acquisition raises it: nothing of this call ran
        # Every one of many reviewers applying at once is accounted for in the trace, as
        # approvers are (DESIGN.md section 6.6).
        trace_append(run_id=run_id, event_type="review.refused",
                     payload={"case_id": decision.case_id, "decision": kind.value, "reviewer": decision.reviewer,
                              "nonce": decision.nonce, "key_id": decision.key_id,
                              "reason": f"lease holder {exc.context.get('holder', '?')} was changing the run"})
        raise
    if kind == DecisionKind.REPLAN:
        # Looked up on the module at call time, so stories can record the hand-off instead.
        runtime.workers.dispatch.run_enqueue(run_id=run_id)
    return outcome


def _fresh_ref(observed: Any, state: RunState) -> Any:
    return store_observation(observed, observation_version=state.environment.observation_version + 1,
                             adapter_generation=state.environment.adapter_generation)


def decision_refused_error(outcome: DecisionOutcome) -> DecisionRefusedError:
    """A typed error for a refused outcome (for CLIs that exit non-zero):
    :class:`DecisionExpiredError` for an expired decision, else :class:`DecisionRefusedError`."""
    kind = DecisionExpiredError if outcome.expired else DecisionRefusedError
    return kind(outcome.reason, case_id=outcome.case_id, run_id=outcome.run_id)
