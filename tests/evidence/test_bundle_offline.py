"""A bundle verifies offline with public keys alone, and a forged one does not, so a bundle proves
something to an outsider who holds no secret (DESIGN.md section 4.8)."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta

import pytest

from runtime.bundles.export import bundle_export, bundle_sign
from runtime.bundles.verification import bundle_verify
from runtime.core.signing import Keyring, SecretKey, TrustRoot, parse_keyring_spec
from runtime.decisions.approvals import approval_grant
from runtime.decisions.reviews import case_decide
from runtime.engine import run_advance
from runtime.evidence.trace import event_hash
from runtime.keys import signer_for
from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _auditor_env(tmp_path):
    """An auditor's machine: no key of any root in the environment, no key file."""
    return child_env(**{f"RATCHET_{root.value.upper()}_{kind}": None
                        for root in TrustRoot for kind in ("KEYS", "PUBLIC_KEYS")},
                     RATCHET_KEY_FILE=str(tmp_path / "auditor-has-no-key-file.json"),
                     RATCHET_CREATE_KEY_FILE="0", DATABASE_URL="sqlite:///" + str(tmp_path / "none.sqlite3"))


@pytest.fixture
def completed_bundle(story, tmp_path):
    item = story.waiting()
    approval_grant(run_id=story.run_id, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert run_advance(run_id=story.run_id, worker="worker-b").phase == "completed"
    return bundle_export(run_id=story.run_id, exported_by="admin")


@pytest.fixture
def public_keys(tmp_path, ratchet_keys):
    out = tmp_path / "public-keys.json"
    written = run_manage("keys", "export-public", "--out", str(out))
    assert written.returncode == 0, written.stderr
    text = out.read_bytes()
    for key in ratchet_keys.values():  # not one private key (nor the checkpoint key) inside
        assert not any(form in text for form in key.leak_forms())
    return out


def _write(tmp_path, bundle, name="bundle.json"):
    path = tmp_path / name
    path.write_text(json.dumps(bundle))
    return path


def test_it_verifies_a_bundle_offline_with_public_keys_alone(completed_bundle, public_keys, tmp_path):
    assert bundle_verify(completed_bundle) == []
    assert completed_bundle["signature"]["key_id"] == "export-test-1"
    assert len(completed_bundle["signature"]["mac"]) == 128  # Ed25519
    result = run_manage("verify_bundle", str(_write(tmp_path, completed_bundle)), "--public-keys",
                        str(public_keys), env=_auditor_env(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"bundle verifies: run {completed_bundle['run']['run_id']}")


def test_it_fails_offline_verification_of_a_forged_bundle(completed_bundle, public_keys, tmp_path, ratchet_keys):
    forged = copy.deepcopy(completed_bundle)
    forged["exported_by"] = "someone else"
    # Whoever holds every secret a worker holds (the checkpoint key) still cannot re-sign it: an
    # export signature made with that key's bytes under the real key id does not verify.
    checkpoint_bytes = parse_keyring_spec("checkpoint", ratchet_keys["checkpoint"].spec)
    impostor = Keyring(TrustRoot.EXPORT, {"export-test-1": SecretKey(
        checkpoint_bytes._keys["checkpoint-test-1"]._material)}, "export-test-1")
    resigned = bundle_sign(forged, keyring=impostor)
    stranger = bundle_sign(forged, keyring=Keyring(TrustRoot.EXPORT, {"other": SecretKey.generate()}, "other"))
    for name, bundle, expected in (
        ("edited.json", forged, "signature: signature does not verify"),
        ("resigned.json", resigned, "signature: signature does not verify"),
        ("stranger.json", stranger, "signature: signed with a key id this trust root does not know"),
    ):
        result = run_manage("verify_bundle", str(_write(tmp_path, bundle, name)), "--public-keys",
                            str(public_keys), env=_auditor_env(tmp_path))
        assert result.returncode == 1, name
        assert "bundle does NOT verify" in result.stderr and expected in result.stderr, (name, result.stderr)


def test_it_names_a_forged_decision_inside_a_bundle(conflict, tmp_path):
    case_decide(decision=conflict.sign("abort", reviewer="rex"))
    bundle = bundle_export(run_id=conflict.run_id)
    assert bundle_verify(bundle) == []
    forged = copy.deepcopy(bundle)
    [case] = forged["review_cases"]
    case["decision"]["reviewer"] = "rita"  # the exporter (or a worker) rewrites who decided
    findings = bundle_verify(bundle_sign(forged, keyring=_export_signer()))
    assert f"review case {conflict.case_id}: decision: signature does not verify: the data was altered " \
           "or signed with another key" in findings


def test_it_names_a_trace_whose_times_go_backwards(completed_bundle):
    bundle = copy.deepcopy(completed_bundle)
    run_id = bundle["run"]["run_id"]
    events = bundle["trace"]
    earlier = datetime.fromisoformat(events[1]["created_at"]) - timedelta(minutes=10)
    events[2]["created_at"] = earlier.isoformat()
    prev = events[1]["hash"]
    for event in events[2:]:  # a consistent chain, dated by a worker whose clock runs slow
        event["prev_hash"] = prev
        event["hash"] = prev = event_hash(run_id=run_id, seq=event["seq"], event_type=event["event_type"],
                                          payload=event["payload"], environment_version=event["environment_version"],
                                          created_at=datetime.fromisoformat(event["created_at"]),
                                          prev_hash=prev)
    bundle["run"]["trace_head"] = prev
    findings = bundle_verify(bundle_sign(bundle, keyring=_export_signer()))
    assert findings == ["trace: event seq 3 is dated before the event before it (time order)"]


def _export_signer() -> Keyring:
    return signer_for(TrustRoot.EXPORT)
