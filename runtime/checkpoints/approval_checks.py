"""The checks the engine applies to approval evidence and to receipts (DESIGN.md section 6).

Approval evidence is signed under the approval trust root and bound to the run, idempotency key,
intent digest and the environment instance, fingerprint and version the approver saw. Expired
evidence still loads (expiry is not corruption) but never authorises execution
(``approval_problem``). A receipt for an approval-gated write is trusted only when it binds the
approval digest, a commit time no later than that approval's expiry, and the business object;
otherwise the run freezes for review (``receipt_trust_problem``). A restored checkpoint's
approval and decision signatures are verified, with the public keys of those roots only, before
anything else (``evidence_verify``). Expiry is judged by the database clock (DESIGN.md section 4.7).

Pure checks: granting and denying approvals is ``runtime.decisions.approvals``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runtime.core.checkpoint import PendingAction, Receipt, RunState
from runtime.core.evidence import (
    approval_digest,
    approval_mismatch,
    approval_verify,
    decision_verify,
    reviewer_name_problem,
    state_evidence_findings,
)
from runtime.core.ledger import state_ledger
from runtime.core.passkey_evidence import state_passkey_findings
from runtime.core.signing import TrustRoot
from runtime.database.clock import db_now
from runtime.errors import BadSignatureError
from runtime.keys import keyring_for, reviewer_names


def evidence_findings(state: RunState) -> list[str]:
    """Every approval and decision signature in ``state`` checked with the configured public
    keys; one line per failure (``manage.py checkpoint verify``; DESIGN.md section 4.8).

    Raises:
        KeyringError: the approval or reviewer public keys are not configured.
    """
    return state_evidence_findings(state, approval=keyring_for(TrustRoot.APPROVAL),
                                   reviewer=keyring_for(TrustRoot.REVIEWER),
                                   reviewer_names=reviewer_names()) + state_passkey_findings(state)


def evidence_verify(state: RunState) -> None:
    """Verify every approval and decision signature held in a restored checkpoint, with the
    public keys of the approval and reviewer roots (DESIGN.md section 4.1).

    DESIGN.md section 6.2: restoring a run that holds approval evidence or signed decisions
    without the matching trust roots fails closed.

    Raises:
        KeyringError: the approval or reviewer keyring is not configured.
        UnknownKeyError / BadSignatureError: evidence signed by an unknown key or altered, or a
            decision naming a reviewer other than the one its key is bound to.
    """
    approvals = []
    if state.pending is not None:
        approvals = [*state.pending.sealed_approvals]
        if state.pending.approval is not None:
            approvals.append(state.pending.approval)
    if approvals:
        ring = keyring_for(TrustRoot.APPROVAL)
        for evidence in approvals:
            approval_verify(evidence, ring)
    decisions = [c.decision for c in state.review_cases if c.decision is not None]
    if decisions:
        ring = keyring_for(TrustRoot.REVIEWER)
        names = reviewer_names()
        for decision in decisions:
            decision_verify(decision, ring)
            problem = reviewer_name_problem(decision, names)
            if problem:
                raise BadSignatureError(problem, root=TrustRoot.REVIEWER.value, key_id=decision.key_id)


def approval_problem(*, pending: PendingAction, state: RunState, observation: Any,
                     now: datetime | None = None) -> str | None:
    """Why the pending write's approval cannot authorise execution now, or None if it can.

    Checks, in order: present, nonce unused, bound to this run/key/intent and to the observed
    environment instance, fingerprint and version (not only the version: DESIGN.md section 7),
    not expired by the database clock (``now`` None: read it; DESIGN.md section 4.7). Returns
    ``"expired"`` exactly when expiry is the only problem.
    """
    evidence = pending.approval
    if evidence is None:
        return "no approval given"
    if state_ledger(state).nonce_consumed(evidence.nonce):
        return "approval nonce already used"
    field = approval_mismatch(
        evidence,
        run_id=state.identity.run_id,
        idempotency_key=pending.idempotency_key,
        intent_digest=pending.intent_digest,
        environment_instance_id=observation.instance_id,
        environment_fingerprint=observation.state_fingerprint,
        environment_version=observation.version,
    )
    if field is not None:
        return f"approval is bound to another {field}"
    if evidence.expires_at <= (now or db_now()):
        return "expired"
    return None


def receipt_trust_problem(*, pending: PendingAction, receipt: Receipt) -> str | None:
    """For an approval-gated write, why ``receipt`` cannot be trusted as approved, or None."""
    if not pending.requires_approval:
        return None
    approvals = [a for a in (*pending.sealed_approvals, pending.approval) if a is not None]
    if not approvals:
        return "the adapter holds a receipt for a write that needs approval, but none was ever given"
    if receipt.approval_digest is None or receipt.committed_at is None or not receipt.business_object:
        return "receipt does not bind the approval digest, commit time and business object"
    matching = [a for a in approvals if approval_digest(a) == receipt.approval_digest]
    if not matching:
        return "receipt is bound to an approval this run never issued"
    if receipt.committed_at > matching[0].expires_at:
        return "the write committed after its approval had expired"
    return None
