"""Story: in the production shape every key comes from environment variables (N9).

A reviewer's own key is bound to that reviewer in every key source: with the reviewer trust
root in ``RATCHET_REVIEWER_PUBLIC_KEYS``, ``RATCHET_REVIEWER_KEY_NAMES`` names the person each
own key belongs to, and a decision signed with alice's key that names bob is refused (DESIGN.md
section 6.3), as it is with the key file.
"""

from __future__ import annotations

import os

import pytest

from runtime.core.signing import TrustRoot, parse_keyring_spec
from runtime.decisions.reviews import case_decide, decision_sign_for
from runtime.engine import run_start
from runtime.errors import KeyringError
from runtime.keys import reviewer_names
from runtime.models import ReviewCase
from tests.cases.conftest import STEPS, freeze_on_conflict
from tests.factories import write_scripted_task
from tests.helpers.keys import make_test_key


@pytest.fixture
def alice(monkeypatch):
    """Alice's own reviewer key, public half and name binding in the environment."""
    key = make_test_key(TrustRoot.REVIEWER, "reviewer-alice")
    verifying = os.environ.get("RATCHET_REVIEWER_PUBLIC_KEYS", "")
    monkeypatch.setenv("RATCHET_REVIEWER_PUBLIC_KEYS", ",".join(p for p in (verifying, key.public_spec) if p))
    monkeypatch.setenv("RATCHET_REVIEWER_KEY_NAMES", "reviewer-alice:alice")
    return parse_keyring_spec(TrustRoot.REVIEWER, key.spec)


@pytest.mark.django_db(transaction=True)
def test_n9_it_refuses_a_decision_signed_with_one_reviewers_env_key_naming_another(tmp_path, alice):
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS), worker="worker-a")
    freeze_on_conflict(run_id, tmp_path / "ws")
    case = ReviewCase.objects.get(run_id=run_id, status="open")

    misnamed = case_decide(decision=decision_sign_for(case_id=case.case_id, reviewer="bob",
                                                      decision="abort", keyring=alice))

    assert not misnamed.applied
    assert misnamed.reason == "wrong reviewer: signed with alice's key but names bob as the reviewer"
    own = case_decide(decision=decision_sign_for(case_id=case.case_id, reviewer="alice",
                                                 decision="abort", keyring=alice))
    assert own.applied


@pytest.mark.parametrize("value", ["reviewer-alice", "reviewer-alice:", ":alice", "k:alice smith",
                                   "k:alice,k:bob"])
def test_it_refuses_a_malformed_or_contradictory_binding(monkeypatch, value):
    monkeypatch.setenv("RATCHET_REVIEWER_KEY_NAMES", value)
    with pytest.raises(KeyringError, match="RATCHET_REVIEWER_KEY_NAMES"):
        reviewer_names()


def test_reviewer_add_says_what_to_add_to_the_environment(tmp_path, ratchet_keys):
    import json

    from runtime.keys import reviewer_key_load
    from tests.helpers.procs import child_env, run_manage

    out = tmp_path / "carol.json"
    added = run_manage("keys", "reviewer-add", "carol", "--out", str(out), env=child_env())

    assert added.returncode == 0, added.stderr
    _name, ring = reviewer_key_load(out)
    key_id = ring.current_key_id
    assert f"RATCHET_REVIEWER_KEY_NAMES: {key_id}:carol" in added.stdout
    assert f"RATCHET_REVIEWER_PUBLIC_KEYS: {key_id}:{ring.public_keys()[key_id].to_b64()}" in added.stdout
    assert json.loads(out.read_text())["private"] not in added.stdout  # never the private key
