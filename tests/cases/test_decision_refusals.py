"""Every binding failure keeps the run frozen and the trace says why (DESIGN.md sections 6, 7)."""

import pytest

from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import DecisionKind
from runtime.core.evidence import DECISION_BOUND_FIELDS, decision_sign
from runtime.core.signing import TrustRoot
from runtime.decisions.reviews import case_decide, decision_prepare
from runtime.engine import run_advance
from runtime.errors import ReviewCaseNotFoundError
from runtime.models import TraceEvent
from tests.cases.conftest import freeze_on_conflict
from tests.factories import make_keyring

pytestmark = pytest.mark.django_db(transaction=True)


def _refusals(story):
    return list(TraceEvent.objects.filter(run_id=story.run_id, event_type="review.refused")
                .values_list("payload", flat=True))


def _assert_frozen(story, outcome, reason_part):
    assert not outcome.applied
    assert reason_part in outcome.reason
    assert story.phase() == "needs_review"
    assert any(reason_part in p["reason"] for p in _refusals(story))
    report = run_advance(run_id=story.run_id, worker="worker-b")
    assert report.phase == "needs_review" and report.steps == 0


def test_it_keeps_the_run_frozen_for_an_unknown_signer(conflict):
    binding = {**decision_prepare(case_id=conflict.case_id), "reviewer": "mallory", "decision": DecisionKind.REPLAN}
    forged = decision_sign(keyring=make_keyring(TrustRoot.REVIEWER, ("mallory-key",)), binding=binding)
    _assert_frozen(conflict, case_decide(decision=forged), "unknown signer")


def test_it_keeps_the_run_frozen_for_a_tampered_signature(conflict):
    signed = conflict.sign("abort")
    tampered = signed.model_copy(update={"decision": DecisionKind.REPLAN})
    _assert_frozen(conflict, case_decide(decision=tampered), "tampered")


def _other(field: str, value):
    if field.endswith(("digest", "fingerprint")):
        return digest(DigestKind.RECEIPT, {"changed": field})
    return f"other-{value}" if value else "other"


BOUND_FIELDS_LITERALLY = (
    "task_id", "task_version", "run_id", "policy_id", "policy_version", "action_kind", "action_target",
    "idempotency_key", "pending_intent_digest", "receipt_intent_digest", "receipt_fingerprint",
    "environment_instance_id", "environment_version", "environment_fingerprint",
)
"""Every field a decision must be bound to, written out here and not taken from the product's
``DECISION_BOUND_FIELDS``: dropping one from the product's binding must fail this test, not
silently drop its case (``case_id`` has its own test below)."""


def test_the_product_binds_every_field_this_test_lists() -> None:
    assert set(BOUND_FIELDS_LITERALLY) <= set(DECISION_BOUND_FIELDS)


@pytest.mark.parametrize("field", BOUND_FIELDS_LITERALLY)
def test_a_reviewer_continue_not_bound_to_receipt_fingerprint_digests_environment_and_nonce(conflict, field):
    current = decision_prepare(case_id=conflict.case_id)
    signed = conflict.sign("replan", **{field: _other(field, current[field])})
    _assert_frozen(conflict, case_decide(decision=signed), field)


def test_it_refuses_a_decision_for_another_case(conflict):
    signed = conflict.sign("replan", case_id="case_" + "0" * 32)
    with pytest.raises(ReviewCaseNotFoundError):
        case_decide(decision=signed)
    assert conflict.phase() == "needs_review"


def test_it_refuses_a_reused_nonce(conflict):
    first = conflict.sign("replan")
    assert case_decide(decision=first).applied
    # The replanned run meets a second conflict; a decision reusing the first nonce is refused.
    key2 = freeze_on_conflict(conflict.run_id, conflict.workspace)
    from runtime.models import ReviewCase

    conflict.case_id = ReviewCase.objects.get(run_id=conflict.run_id, status="open").case_id
    conflict.key = key2
    replay = conflict.sign("replan", nonce=first.nonce)
    _assert_frozen(conflict, case_decide(decision=replay), "nonce already used")


def test_it_refuses_a_decision_when_the_environment_changed_after_signing(conflict):
    signed = conflict.sign("replan")
    (conflict.workspace / "unexpected.txt").write_text("someone else was here\n")
    _assert_frozen(conflict, case_decide(decision=signed), "environment changed after signing")


def test_it_refuses_a_decision_when_the_receipt_drifted_between_signing_and_applying(conflict):
    signed = conflict.sign("replan")
    conflict.tamper_receipt_result()
    _assert_frozen(conflict, case_decide(decision=signed), "receipt drift")
