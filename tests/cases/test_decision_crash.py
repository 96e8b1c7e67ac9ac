"""Applying a decision survives a SIGKILL mid-apply (real child process, real SIGKILL)."""

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.ledger import state_ledger
from runtime.decisions.reviews import case_decide
from runtime.engine import run_advance
from runtime.models import ReviewCase
from tests.helpers.procs import KILLED, child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("decision,final", [("replan", "completed"), ("abort", "failed")])
@pytest.mark.parametrize("point", ["review.before_decision_commit", "review.after_decision_commit"])
def test_it_survives_a_sigkill_mid_apply(conflict, tmp_path, decision, final, point):
    signed = conflict.sign(decision)
    path = tmp_path / "decision.json"
    path.write_text(signed.model_dump_json())
    crashed = run_manage("cases", "apply", str(path),
                         env=child_env(RATCHET_CRASH_AT=point, RATCHET_LEASE_SECONDS="1"))
    assert crashed.returncode == KILLED, crashed.stderr
    outcome = case_decide(decision=signed)
    assert outcome.applied
    assert outcome.already_applied is (point == "review.after_decision_commit")
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    assert case.status == ("replanned" if decision == "replan" else "aborted")
    report = run_advance(run_id=conflict.run_id, worker="worker-b", wait_seconds=5)
    assert report.phase == final
    state = checkpoint_verify(run_id=conflict.run_id).state
    assert state_ledger(state).nonce_consumed(signed.nonce)  # once: (run, kind, key) is unique
    if decision == "replan":
        assert conflict.effects_for(conflict.key) == 1  # the rogue write only; the key never reused
