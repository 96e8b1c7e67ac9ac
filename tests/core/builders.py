"""Small builders for the parts of a run state the core tests need (on top of tests.factories)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import (
    Action,
    ApprovalEvidence,
    ExecutedWrite,
    PendingAction,
    Phase,
    Receipt,
    ReviewCaseRef,
    RunState,
    StopReason,
    VerifierResult,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def action(target: str = "notes.md", content: str = "hello") -> Action:
    return Action(kind="write_file", target=target, params={"content": content})


def pending_for(state: RunState, *, key: str = "ik-1", act: Action | None = None, **fields: Any
                ) -> PendingAction:
    act = act or action()
    return PendingAction(
        action=act,
        intent_digest=act.intent_digest(),
        idempotency_key=key,
        cursor=state.cursor,
        replan_epoch=state.replan_epoch,
        pre_state=state.environment.model_copy(deep=True),
        proposed_at=T0,
        **fields,
    )


def receipt_for(key: str, intent: str, **fields: Any) -> Receipt:
    values: dict[str, Any] = {
        "namespace": "workspace",
        "adapter_version": "1",
        "receipt_id": f"rcpt-{key}",
        "idempotency_key": key,
        "intent_digest": intent,
        "result": {"ok": True},
        "environment_version_after": "v1",
        "fencing_token": 1,
    }
    values.update(fields)
    return Receipt(**values)


def executed_for(key: str, act: Action | None = None, cursor: int = 0) -> ExecutedWrite:
    act = act or action(content=key)
    receipt = receipt_for(key, act.intent_digest())
    return ExecutedWrite(
        idempotency_key=key,
        intent_digest=act.intent_digest(),
        cursor=cursor,
        receipt=receipt,
        receipt_fingerprint=receipt.fingerprint(),
    )


def approval_for(state: RunState, pending: PendingAction, **fields: Any) -> ApprovalEvidence:
    values: dict[str, Any] = {
        "approval_id": "appr-1",
        "run_id": state.identity.run_id,
        "idempotency_key": pending.idempotency_key,
        "intent_digest": pending.intent_digest,
        "environment_instance_id": pending.pre_state.instance_id,
        "environment_fingerprint": pending.pre_state.state_fingerprint,
        "environment_version": pending.pre_state.version,
        "approver": "operator@tenant-1",
        "issued_at": T0,
        "expires_at": T0 + timedelta(hours=1),
        "nonce": "nonce-1",
        "key_id": "approval-k1",
        "mac": "0" * 64,
    }
    values.update(fields)
    return ApprovalEvidence(**values)


def conflict_case_for(state: RunState, pending: PendingAction, **fields: Any) -> ReviewCaseRef:
    theirs = receipt_for(pending.idempotency_key, digest(DigestKind.INTENT, {"other": "intent"}))
    values: dict[str, Any] = {
        "case_id": "case-1",
        "reason": StopReason.RECEIPT_CONFLICT,
        "idempotency_key": pending.idempotency_key,
        "intent_digest": pending.intent_digest,
        "receipt": theirs,
        "receipt_fingerprint": theirs.fingerprint(),
        "environment_version": state.environment.version,
        "opened_at": T0,
    }
    values.update(fields)
    return ReviewCaseRef(**values)


def passing_verifier(state: RunState, **fields: Any) -> VerifierResult:
    values: dict[str, Any] = {
        "environment_version": state.environment.version,
        "environment_fingerprint": state.environment.state_fingerprint,
        "passed": True,
        "at": T0,
    }
    values.update(fields)
    return VerifierResult(**values)


def completed(state: RunState) -> RunState:
    state.verifier_results.append(passing_verifier(state))
    state.phase = Phase.COMPLETED
    state.stop_reason = StopReason.VERIFIED
    return state
