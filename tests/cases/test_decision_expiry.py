"""Reviewer decisions carry a signed expiry on the database clock, and an expired one is refused
with a typed error and traced, so a signed decision cannot be kept and used forever (DESIGN.md
sections 4.7 and 6.3)."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
import time_machine

from runtime.bundles.export import bundle_export, bundle_sign
from runtime.bundles.verification import bundle_verify
from runtime.checkpoints.approval_checks import evidence_findings
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import SignedDecision
from runtime.core.evidence import decision_sign
from runtime.core.signing import TrustRoot
from runtime.database.clock import db_now
from runtime.decisions.reviews import case_decide, decision_prepare, decision_refused_error
from runtime.errors import DecisionExpiredError
from runtime.keys import signer_for
from runtime.models import TraceEvent
from tests.helpers.procs import run_manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _refusals(run_id: str) -> list[dict]:
    return list(TraceEvent.objects.filter(run_id=run_id, event_type="review.refused")
                .order_by("seq").values_list("payload", flat=True))


def test_it_refuses_an_expired_decision(conflict, settings):
    settings.RATCHET_DECISION_SECONDS = 2
    signed = conflict.sign("abort", reviewer="rex")
    assert signed.expires_at == signed.issued_at + timedelta(seconds=2)
    wait_for(lambda: db_now() > signed.expires_at, timeout=30, what="the decision to expire")

    outcome = case_decide(decision=signed)

    assert not outcome.applied and outcome.expired
    assert outcome.reason.startswith("expired decision: its validity ended at")
    assert isinstance(decision_refused_error(outcome), DecisionExpiredError)
    [refusal] = _refusals(conflict.run_id)
    assert refusal["expired"] is True and refusal["nonce"] == signed.nonce
    assert conflict.phase() == "needs_review"
    # A fresh decision is applied.
    assert case_decide(decision=conflict.sign("abort", reviewer="rex")).applied


def test_it_judges_decision_expiry_by_the_database_clock(conflict, settings):
    settings.RATCHET_DECISION_SECONDS = 2
    # A reviewer machine a day fast still signs an expiry counted from the database clock.
    with time_machine.travel(db_now() + timedelta(days=1), tick=True):
        signed = conflict.sign("abort", reviewer="rex")
    assert signed.expires_at - db_now() <= timedelta(seconds=2)
    wait_for(lambda: db_now() > signed.expires_at, timeout=30, what="the decision to expire")
    # A worker whose clock is ten minutes slow does not make it valid again.
    with time_machine.travel(db_now() - timedelta(minutes=10), tick=True):
        outcome = case_decide(decision=signed)
    assert not outcome.applied and outcome.expired

    # And one whose clock is an hour fast does not expire a decision the database says is valid.
    settings.RATCHET_DECISION_SECONDS = 600
    fresh = conflict.sign("abort", reviewer="rex")
    with time_machine.travel(db_now() + timedelta(hours=1), tick=True):
        assert case_decide(decision=fresh).applied


def test_it_signs_the_expiry_so_extending_it_breaks_the_signature(conflict, settings):
    settings.RATCHET_DECISION_SECONDS = 600
    signed = conflict.sign("abort", reviewer="rex")
    extended = SignedDecision.model_validate(
        {**signed.model_dump(mode="json"), "expires_at": (signed.expires_at + timedelta(days=365)).isoformat()},
        strict=False)

    outcome = case_decide(decision=extended)

    assert not outcome.applied and outcome.reason == "tampered decision: the signature does not verify"


def test_it_lowers_a_signed_validity_to_the_configured_one(conflict, settings):
    settings.RATCHET_DECISION_SECONDS = 600
    signed = conflict.sign("abort", reviewer="rex")
    settings.RATCHET_DECISION_SECONDS = 0.001  # an operator shortened it after signing
    wait_for(lambda: db_now() > signed.issued_at + timedelta(seconds=0.001), timeout=30, what="the shorter validity")
    outcome = case_decide(decision=signed)
    assert not outcome.applied and outcome.expired


def test_it_never_applies_a_decision_signed_before_decisions_carried_an_expiry(conflict):
    binding = {**decision_prepare(case_id=conflict.case_id), "reviewer": "rex", "decision": "abort",
               "issued_at": db_now()}
    legacy = decision_sign(keyring=signer_for(TrustRoot.REVIEWER), binding=binding, validity_seconds=None)
    assert legacy.expires_at is None and "expires_at" not in legacy.model_dump(mode="json")

    outcome = case_decide(decision=legacy)

    assert not outcome.applied and outcome.expired
    assert "no signed expiry" in outcome.reason
    assert conflict.phase() == "needs_review"


def test_it_still_verifies_a_checkpoint_holding_a_decision_signed_without_an_expiry(conflict):
    assert case_decide(decision=conflict.sign("abort", reviewer="rex")).applied
    state = checkpoint_verify(run_id=conflict.run_id).state
    [ref] = [r for r in state.review_cases if r.decision is not None]
    fields = {k: v for k, v in ref.decision.model_dump(mode="json").items()
              if k not in ("expires_at", "key_id", "mac")}
    ref.decision = decision_sign(keyring=signer_for(TrustRoot.REVIEWER), binding=fields, validity_seconds=None)
    assert evidence_findings(state) == []


def test_it_names_a_decision_whose_expiry_was_altered_inside_a_bundle(conflict):
    assert case_decide(decision=conflict.sign("abort", reviewer="rex")).applied
    bundle = bundle_export(run_id=conflict.run_id)
    assert bundle_verify(bundle) == []
    forged = copy.deepcopy(bundle)
    [case] = forged["review_cases"]
    case["decision"]["expires_at"] = "2099-01-01T00:00:00Z"

    findings = bundle_verify(bundle_sign(forged, keyring=signer_for(TrustRoot.EXPORT)))

    assert f"review case {conflict.case_id}: decision: signature does not verify: the data was altered " \
           "or signed with another key" in findings


def test_the_command_line_refuses_an_expired_decision_file(conflict, settings, tmp_path):
    settings.RATCHET_DECISION_SECONDS = 1
    signed = conflict.sign("abort", reviewer="rex")
    path = tmp_path / "decision.json"
    path.write_text(signed.model_dump_json())
    wait_for(lambda: db_now() > signed.expires_at, timeout=30, what="the decision to expire")

    result = run_manage("cases", "apply", str(path))

    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    assert "expired decision: its validity ended at" in result.stderr
    assert conflict.phase() == "needs_review"
