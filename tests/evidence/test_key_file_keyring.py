"""The key-file keyring, the fresh-install default, with no key in the environment (the
other tests set keys through the environment, so this path needs tests of its own; DESIGN.md
section 4.1)."""

from __future__ import annotations

import json
import stat

import pytest

from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.core.signing import PublicKey, SecretKey, TrustRoot
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.decisions.reviews import case_decide, decision_sign_for
from runtime.engine import run_advance, run_start
from runtime.errors import KeyringError
from runtime.keys import keyring_for, reviewer_key_load, signer_for
from runtime.models import ReviewCase
from tests.cases.conftest import STEPS, freeze_on_conflict
from tests.factories import write_scripted_task
from tests.helpers.procs import child_env, run_manage


@pytest.fixture
def key_file(tmp_path, monkeypatch, settings):
    """No ``RATCHET_*_KEYS`` anywhere: every key comes from a key file created on first use."""
    for root in TrustRoot:
        monkeypatch.delenv(f"RATCHET_{root.value.upper()}_KEYS", raising=False)
        monkeypatch.delenv(f"RATCHET_{root.value.upper()}_PUBLIC_KEYS", raising=False)
    path = tmp_path / "var" / "keys.json"
    settings.RATCHET_KEY_FILE = path
    settings.RATCHET_CREATE_KEY_FILE = True
    monkeypatch.setenv("RATCHET_KEY_FILE", str(path))  # for child processes
    return path


def test_it_creates_a_private_key_file_with_every_root_on_first_use(key_file):
    ring = keyring_for(TrustRoot.CHECKPOINT)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    data = json.loads(key_file.read_text())
    assert set(data) == {"checkpoint", "approval", "reviewer", "export"}
    assert data["checkpoint"]["current"] == ring.current_key_id and "public" not in data["checkpoint"]
    for root in ("approval", "reviewer", "export"):
        section = data[root]
        [(key_id, seed)] = section["keys"].items()
        assert section["public"] == {key_id: PublicKey.of(SecretKey.from_b64(seed)).to_b64()}
    assert keyring_for(TrustRoot.CHECKPOINT).current_key_id == ring.current_key_id  # created once


def test_it_verifies_with_public_keys_and_signs_only_with_private_ones(key_file):
    verifier, signer = keyring_for(TrustRoot.APPROVAL), signer_for(TrustRoot.APPROVAL)
    assert not verifier.can_sign and signer.can_sign
    verifier.verify(b"approve", signer.sign(b"approve"))
    with pytest.raises(KeyringError, match="cannot sign"):
        verifier.sign(b"approve")


def test_a_worker_key_file_holds_public_keys_and_cannot_sign(key_file):
    keyring_for(TrustRoot.CHECKPOINT)
    signature = signer_for(TrustRoot.REVIEWER).sign(b"decision")
    data = json.loads(key_file.read_text())
    for root in ("approval", "reviewer", "export"):
        del data[root]["keys"]  # what a worker's key file holds
    key_file.write_text(json.dumps(data))
    keyring_for(TrustRoot.REVIEWER).verify(b"decision", signature)
    for root in (TrustRoot.APPROVAL, TrustRoot.REVIEWER, TrustRoot.EXPORT):
        with pytest.raises(KeyringError, match="holds no private"):
            signer_for(root)


def test_it_adds_the_export_root_to_an_older_key_file_and_keeps_its_checkpoint_key(key_file):
    keyring_for(TrustRoot.CHECKPOINT)
    data = json.loads(key_file.read_text())
    checkpoint = data["checkpoint"]
    del data["export"]
    key_file.write_text(json.dumps(data))
    assert keyring_for(TrustRoot.EXPORT).key_ids
    again = json.loads(key_file.read_text())
    assert again["checkpoint"] == checkpoint and "export" in again
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_it_verifies_an_old_signature_after_a_rotation_in_the_key_file(key_file):
    keyring_for(TrustRoot.CHECKPOINT)
    old = signer_for(TrustRoot.APPROVAL)
    signature = old.sign(b"granted")
    data = json.loads(key_file.read_text())
    data["approval"]["keys"]["approval-new"] = SecretKey.generate().to_b64()
    data["approval"]["current"] = "approval-new"
    key_file.write_text(json.dumps(data))
    assert signer_for(TrustRoot.APPROVAL).current_key_id == "approval-new"
    keyring_for(TrustRoot.APPROVAL).verify(b"granted", signature)


@pytest.mark.django_db(transaction=True)
def test_a_run_with_an_approval_completes_and_its_bundle_verifies_on_the_key_file(key_file, tmp_path):
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n", "risk": "high"}],
                               approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker="worker-a")
    assert run_advance(run_id=run_id, worker="worker-a").phase == "awaiting_approval"
    [item] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert run_advance(run_id=run_id, worker="worker-b").phase == "completed"
    assert bundle_verify(bundle_export(run_id=run_id)) == []


@pytest.mark.django_db(transaction=True)
def test_a_reviewer_decides_on_the_command_line_with_their_own_key_file(key_file, tmp_path):
    spec = write_scripted_task(tmp_path, steps=STEPS)
    run_id = run_start(spec_path=spec, worker="worker-a")
    freeze_on_conflict(run_id, tmp_path / "ws")
    case = ReviewCase.objects.get(run_id=run_id, status="open")
    env = child_env()
    alice = tmp_path / "alice.json"
    added = run_manage("keys", "reviewer-add", "alice", "--out", str(alice), env=env)
    assert added.returncode == 0, added.stderr
    assert stat.S_IMODE(alice.stat().st_mode) == 0o600
    name, ring = reviewer_key_load(alice)
    assert name == "alice" and ring.current_key_id in keyring_for(TrustRoot.REVIEWER).key_ids
    # Alice's key is bound to her name: a decision made with it that names bob is refused.
    misnamed = decision_sign_for(case_id=case.case_id, reviewer="bob", decision="abort", keyring=ring)
    outcome = case_decide(decision=misnamed)
    assert not outcome.applied
    assert outcome.reason == "wrong reviewer: signed with alice's key but names bob as the reviewer"
    # The name comes from the key file: there is no --reviewer option any more.
    refused = run_manage("cases", "decide", case.case_id, "--reviewer", "bob", "--decision", "abort", env=env)
    assert refused.returncode != 0 and "--key-file" in refused.stderr
    decided = run_manage("cases", "decide", case.case_id, "--key-file", str(alice), "--decision", "abort", env=env)
    assert decided.returncode == 0, decided.stderr
    case.refresh_from_db()
    assert case.status == "aborted" and case.decided_by == "alice"
    assert case.decision["key_id"] == ring.current_key_id
