"""Signed decisions expire, judged by the database clock, so a decision cannot be kept and
applied forever (DESIGN.md sections 4.7 and 6.3)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine

from runtime.core.evidence import decision_sign
from runtime.core.signing import TrustRoot
from runtime.database.clock import db_now
from runtime.decisions.reviews import case_decide, decision_prepare
from runtime.keys import signer_for
from tests.helpers.procs import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_a_decision_signed_longer_ago_than_its_validity(conflict, settings):
    settings.RATCHET_DECISION_SECONDS = 1
    signed = conflict.sign("abort", reviewer="rex")
    assert signed.issued_at <= db_now()
    wait_for(lambda: db_now() > signed.issued_at + timedelta(seconds=1), timeout=30, what="the decision to expire")
    # A reviewer machine whose clock is slow does not make it valid again.
    with time_machine.travel(db_now() - timedelta(minutes=10), tick=True):
        outcome = case_decide(decision=signed)
    assert not outcome.applied and outcome.reason.startswith("expired decision")
    assert conflict.phase() == "needs_review"


def test_it_refuses_a_decision_stamped_in_the_future(conflict):
    binding = {**decision_prepare(case_id=conflict.case_id), "reviewer": "rex", "decision": "abort",
               "issued_at": db_now() + timedelta(days=1)}
    outcome = case_decide(decision=decision_sign(keyring=signer_for(TrustRoot.REVIEWER), binding=binding))
    assert not outcome.applied and outcome.reason == "decision is stamped in the future by the database clock"


def test_it_applies_a_fresh_decision(conflict):
    assert case_decide(decision=conflict.sign("abort", reviewer="rex")).applied
