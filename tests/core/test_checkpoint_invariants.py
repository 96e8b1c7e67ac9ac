"""Cross-object invariants of a run state (DESIGN.md sections 3-6), checked before signing.

Story: the engine has a bug and tries to checkpoint a state that contradicts itself. The
checkpoint is refused with a typed error naming the run, so the last good checkpoint stays the
one that restores. Each test starts from a valid state, proves it passes, then breaks one thing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import (
    Phase,
    ReviewCaseRef,
    ReviewCaseStatus,
    RunState,
    StopReason,
)
from runtime.core.invariants import check_invariants, validate_state
from runtime.core.ledger import ledger_pending_check, state_ledger
from runtime.errors import CheckpointInvariantError
from tests.core import builders as b
from tests.factories import make_state


def _refused(state: RunState, words: str) -> None:
    with pytest.raises(CheckpointInvariantError) as caught:
        validate_state(state)
    assert words in str(caught.value)
    assert caught.value.context["run_id"] == state.identity.run_id


def _pending_state(**fields) -> RunState:
    state = make_state(**fields)
    state.pending = b.pending_for(state)
    state.phase = Phase.PENDING
    validate_state(state)
    return state


def test_it_requires_a_pending_action_while_pending_or_awaiting_approval():
    for phase in (Phase.PENDING, Phase.AWAITING_APPROVAL):
        _refused(make_state(phase=phase), "needs a pending action")


def test_it_refuses_a_pending_action_while_running():
    state = _pending_state()
    state.phase = Phase.RUNNING
    _refused(state, "running run has no pending action")


def test_it_requires_a_stop_reason_in_terminal_phases():
    state = make_state(phase=Phase.FAILED)
    _refused(state, "needs a stop_reason")
    state.stop_reason = StopReason.VERIFIER_FAILED
    validate_state(state)


def test_it_completes_only_with_a_passing_verifier_at_the_final_version_and_fingerprint():
    validate_state(b.completed(make_state()))

    state = make_state(phase=Phase.COMPLETED, stop_reason=StopReason.VERIFIED)
    _refused(state, "passing verifier")

    failing = b.completed(make_state())
    failing.verifier_results[-1] = b.passing_verifier(failing, passed=False)
    _refused(failing, "passing verifier")

    old_version = b.completed(make_state())
    old_version.verifier_results[-1] = b.passing_verifier(old_version, environment_version="v-old")
    _refused(old_version, "passing verifier")

    # Same version, different content: binding only the version is not enough (section 7).
    other_content = b.completed(make_state())
    other_content.verifier_results[-1] = b.passing_verifier(
        other_content, environment_fingerprint=digest(DigestKind.ENVIRONMENT, {"other": 1})
    )
    _refused(other_content, "fingerprint")


def test_it_refuses_to_complete_with_a_write_still_pending():
    state = _pending_state()
    b.completed(state)
    _refused(state, "completed run cannot have a pending write")


def test_it_refuses_a_pending_digest_that_does_not_match_its_action():
    state = _pending_state()
    state.pending.intent_digest = digest(DigestKind.INTENT, {"something": "else"})
    _refused(state, "does not match the pending action")


def _refused_by_ledger(state: RunState, words: str, action) -> None:
    # Executed writes, nonces and quarantined keys live in the receipts ledger (DESIGN.md
    # section 3.1): its view refuses a bad entry when it is recorded, before any commit.
    with pytest.raises(CheckpointInvariantError) as caught:
        action(state_ledger(state))
    assert words in str(caught.value)
    assert caught.value.context["run_id"] == state.identity.run_id


def test_it_refuses_to_reuse_an_executed_or_quarantined_key():
    state = _pending_state()
    state_ledger(state).record_executed(b.executed_for("ik-1"))
    with pytest.raises(CheckpointInvariantError, match="reuses the key of an executed write"):
        ledger_pending_check(state)

    state = _pending_state()
    state_ledger(state).quarantine_key("ik-1")
    with pytest.raises(CheckpointInvariantError, match="quarantined"):
        ledger_pending_check(state)


def test_it_refuses_the_same_key_twice_among_executed_writes():
    state = make_state()
    state_ledger(state).record_executed(b.executed_for("ik-1"))
    _refused_by_ledger(state, "already executed",
                       lambda ledger: ledger.record_executed(b.executed_for("ik-1", cursor=1)))


def test_it_refuses_a_receipt_that_is_not_the_writes_own():
    write = b.executed_for("ik-1")
    write.receipt = b.receipt_for("ik-other", write.intent_digest)
    write.receipt_fingerprint = write.receipt.fingerprint()
    _refused_by_ledger(make_state(), "carries another key", lambda ledger: ledger.record_executed(write))

    other = b.executed_for("ik-1")
    other.receipt = b.receipt_for("ik-1", digest(DigestKind.INTENT, {"x": 1}))
    other.receipt_fingerprint = other.receipt.fingerprint()
    _refused_by_ledger(make_state(), "for another intent", lambda ledger: ledger.record_executed(other))

    forged = b.executed_for("ik-1")
    forged.receipt_fingerprint = digest(DigestKind.RECEIPT, {"forged": True})
    _refused_by_ledger(make_state(), "fingerprint", lambda ledger: ledger.record_executed(forged))


def test_it_binds_the_pending_pre_state_to_the_runs_environment_instance():
    state = _pending_state()
    state.pending.pre_state.instance_id = "env-elsewhere"
    _refused(state, "another environment instance")


def test_it_refuses_a_pending_action_from_a_future_replan_epoch():
    state = _pending_state()
    state.pending.replan_epoch = state.replan_epoch + 1
    _refused(state, "replan epoch")


def test_it_binds_approval_evidence_to_this_run_action_key_and_instance():
    state = _pending_state()
    state.pending.approval = b.approval_for(state, state.pending)
    state.phase = Phase.PENDING
    validate_state(state)

    for field, value in [
        ("run_id", "another-run"),
        ("idempotency_key", "ik-other"),
        ("intent_digest", digest(DigestKind.INTENT, {"x": 1})),
    ]:
        bad = _pending_state()
        bad.pending.approval = b.approval_for(bad, bad.pending, **{field: value})
        _refused(bad, "bound to another action")

    bad = _pending_state()
    bad.pending.approval = b.approval_for(bad, bad.pending, environment_instance_id="env-9")
    _refused(bad, "another environment instance")

    bad = _pending_state()
    bad.pending.sealed_approvals.append(
        b.approval_for(bad, bad.pending, approval_id="appr-0", idempotency_key="ik-other")
    )
    _refused(bad, "bound to another action")

    bad = _pending_state()
    bad.pending.approval = b.approval_for(bad, bad.pending, expires_at=b.T0 - timedelta(seconds=1))
    _refused(bad, "expires before it is issued")


def test_it_still_loads_expired_approval_evidence():
    """Section 6: expiry is not corruption; the evidence loads and the action stays frozen."""
    state = _pending_state()
    expires = b.T0 + timedelta(seconds=1)
    state.pending.approval = b.approval_for(state, state.pending, expires_at=expires)
    state.phase = Phase.AWAITING_APPROVAL
    state.stop_reason = StopReason.APPROVAL_EXPIRED
    assert validate_state(state).pending.approval.expires_at == expires


def test_it_requires_an_open_case_in_needs_review_and_no_open_case_elsewhere():
    state = make_state(phase=Phase.NEEDS_REVIEW, stop_reason=StopReason.ENVIRONMENT_DRIFT)
    _refused(state, "requires an open review case")

    drift_case = ReviewCaseRef(
        case_id="case-drift", reason=StopReason.ENVIRONMENT_DRIFT, idempotency_key=None,
        intent_digest=None, environment_version="v0", opened_at=b.T0,
    )
    state.review_cases.append(drift_case)
    validate_state(state)

    state.phase = Phase.RUNNING
    _refused(state, "cannot have an open review case")

    state.review_cases[0].status = ReviewCaseStatus.REPLANNED
    validate_state(state)


def test_it_keeps_the_pending_intent_while_a_receipt_conflict_is_open():
    """Section 7: "deleting the pending intent on a conflict"."""
    state = _pending_state()
    state.review_cases.append(b.conflict_case_for(state, state.pending))
    state.phase = Phase.NEEDS_REVIEW
    state.stop_reason = StopReason.RECEIPT_CONFLICT
    validate_state(state)

    state.pending = None
    _refused(state, "needs its pending action kept")


def test_it_keeps_the_full_conflicting_receipt_and_its_fingerprint():
    state = _pending_state()
    case = b.conflict_case_for(state, state.pending)
    state.review_cases.append(case)
    state.phase = Phase.NEEDS_REVIEW
    state.stop_reason = StopReason.RECEIPT_CONFLICT

    case.receipt_fingerprint = digest(DigestKind.RECEIPT, {"not": "it"})
    _refused(state, "receipt fingerprint does not match")

    case.receipt = None
    case.receipt_fingerprint = None
    _refused(state, "must keep the full receipt")


def test_it_requires_a_case_about_a_write_to_name_it():
    state = _pending_state()
    state.review_cases.append(b.conflict_case_for(state, state.pending, idempotency_key=None))
    state.phase = Phase.NEEDS_REVIEW
    state.stop_reason = StopReason.RECEIPT_CONFLICT
    _refused(state, "must name its key and intent")


def test_it_refuses_duplicate_case_ids_and_consumed_nonces():
    state = _pending_state()
    state.review_cases.extend([
        b.conflict_case_for(state, state.pending),
        b.conflict_case_for(state, state.pending),
    ])
    state.phase = Phase.NEEDS_REVIEW
    state.stop_reason = StopReason.RECEIPT_CONFLICT
    _refused(state, "review case id appears twice")

    state = make_state()
    state_ledger(state).consume_nonce("n1")
    _refused_by_ledger(state, "nonce appears twice", lambda ledger: ledger.consume_nonce("n1"))


def test_it_keeps_usage_within_limits_unless_the_run_ended_on_its_budget():
    state = make_state()
    state.usage.steps = state.limits.steps + 1
    _refused(state, "budget usage steps exceeds its limit")

    state.phase = Phase.FAILED
    state.stop_reason = StopReason.BUDGET_EXHAUSTED
    validate_state(state)

    costly = make_state()
    costly.usage.cost_micros = 1
    _refused(costly, "cost_micros")


def test_it_allows_wall_time_past_the_limit_while_a_human_decides():
    state = _pending_state()
    state.phase = Phase.AWAITING_APPROVAL
    state.usage.wall_seconds = state.limits.wall_seconds * 10
    validate_state(state)


def test_it_requires_the_scope_to_carry_the_runs_policy_version():
    state = make_state()
    state.scope.policy_version = "2"
    _refused(state, "policy version")


def test_it_checks_invariants_directly_as_well():
    state = make_state(phase=Phase.PENDING)
    with pytest.raises(CheckpointInvariantError):
        check_invariants(state)
