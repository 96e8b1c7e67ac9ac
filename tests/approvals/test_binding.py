"""Approval evidence binds instance and fingerprint, not only the version (DESIGN.md section 7)."""

from dataclasses import replace

import pytest

from runtime.checkpoints.approval_checks import approval_problem
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.ledger import state_ledger
from runtime.decisions.approvals import approval_grant

pytestmark = pytest.mark.django_db(transaction=True)


def test_binding_only_the_environment_version_not_instance_and_fingerprint(story):
    item = story.waiting()
    approval_grant(run_id=story.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    state = checkpoint_verify(run_id=story.run_id).state
    obs = story.adapter().observe()
    assert approval_problem(pending=state.pending, state=state, observation=obs) is None
    same_version_other_content = replace(obs, state_fingerprint="sha256:" + "0" * 64)
    assert "fingerprint" in approval_problem(pending=state.pending, state=state,
                                             observation=same_version_other_content)
    same_content_other_instance = replace(obs, instance_id="another-instance")
    assert "instance" in approval_problem(pending=state.pending, state=state,
                                          observation=same_content_other_instance)


def test_it_refuses_a_reused_approval_nonce(story):
    item = story.waiting()
    approval_grant(run_id=story.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    state = checkpoint_verify(run_id=story.run_id).state
    state_ledger(state).consume_nonce(state.pending.approval.nonce)
    assert approval_problem(pending=state.pending, state=state, observation=story.adapter().observe()) \
        == "approval nonce already used"
