"""A signed evidence bundle of a run verifies offline, and every kind of tampering with it is
named: the bundle's export signature, an edited or removed trace event, a checkpoint envelope that
does not open, a committed checkpoint that is not the high-water mark's, so the bundle proves what it holds
without the database (DESIGN.md section 4.8).

Bundles are signed with the Ed25519 *export* key: whoever lacks its private half (a worker, which
holds the checkpoint key and only public keys) cannot re-sign an edited bundle."""

from __future__ import annotations

import copy
import dataclasses
import json
import os

import pytest
from django.urls import reverse

from runtime.bundles.export import bundle_export, bundle_sign
from runtime.bundles.verification import BundleTrust, bundle_trust, bundle_verify
from runtime.core.signing import Keyring, PublicKey, SecretKey, TrustRoot
from runtime.errors import BundleExportError, KeyringError, WrongTrustRootError
from runtime.keys import signer_for
from runtime.models import TraceEvent
from tests.factories import make_state
from tests.helpers.keys import TestKey
from tests.review.rows import build_run, pending_state


@pytest.fixture(autouse=True)
def _keys(all_root_keys) -> dict[str, TestKey]:  # type: ignore[no-untyped-def]
    return all_root_keys


@pytest.fixture
def bundle(checkpoint_keyring, db) -> dict:  # type: ignore[no-untyped-def]
    state = pending_state(make_state(run_id="run-bundle"))
    build_run(
        checkpoint_keyring,
        run_id="run-bundle",
        phase="pending",
        state=state,
        generations=3,
        events=6,
    )
    return bundle_export(run_id="run-bundle", exported_by="admin")


def _export_signer() -> Keyring:
    """The export trust root's private keyring: only the exporting process holds it."""
    return signer_for(TrustRoot.EXPORT)


def _auditor() -> BundleTrust:
    """Public keys alone, from the configuration (no checkpoint key, no private key)."""
    trust = bundle_trust()
    assert not trust.export.can_sign and trust.checkpoint is None
    return trust


def test_it_exports_a_bundle_that_verifies(bundle, checkpoint_keyring) -> None:
    assert bundle_verify(bundle, checkpoint_keyring) == []
    assert bundle_verify(bundle, None, trust=_auditor()) == [], "public keys alone suffice"
    assert bundle["format"] == "ratchet-evidence-bundle/1"
    assert bundle["signature"]["key_id"] == "export-test-1"
    assert len(bundle["signature"]["mac"]) == 128, "an Ed25519 signature, not a checkpoint MAC"
    assert bundle["run"]["run_id"] == "run-bundle" and bundle["exported_by"] == "admin"
    assert bundle["high_water_mark"]["generation"] == 3
    assert [c["committed"] for c in bundle["checkpoints"]] == [False, False, True]
    assert [e["seq"] for e in bundle["trace"]] == [1, 2, 3, 4, 5, 6]
    assert bundle["receipts"][0]["receipt"]["receipt_id"] == "rcpt-0001"
    json.dumps(bundle)  # plain JSON all the way down


def test_it_survives_a_json_round_trip(bundle, checkpoint_keyring) -> None:
    again = json.loads(json.dumps(bundle, indent=2))
    assert bundle_verify(again, checkpoint_keyring) == []
    assert bundle_verify(again, None, trust=_auditor()) == []


def test_it_names_an_edited_trace_event_even_when_the_bundle_is_re_signed(
    bundle, checkpoint_keyring
) -> None:
    edited = copy.deepcopy(bundle)
    edited["trace"][2]["payload"] = {"step": "something else"}
    for findings in (bundle_verify(edited, checkpoint_keyring),
                     bundle_verify(edited, None, trust=_auditor())):
        assert findings[0].startswith("signature: signature does not verify")
        assert "trace: event seq 3 was altered after it was written" in findings
    # Even the holder of the export key, re-signing an edited bundle, cannot make the trace
    # chain recompute.
    resigned = bundle_sign(edited, keyring=_export_signer())
    assert bundle_verify(resigned, checkpoint_keyring) == [
        "trace: event seq 3 was altered after it was written"
    ]


def test_no_one_without_the_export_private_key_can_re_sign_a_bundle(
    bundle, checkpoint_keyring, monkeypatch
) -> None:
    edited = copy.deepcopy(bundle)
    edited["exported_by"] = "someone else"  # an edit no other check would catch
    with pytest.raises(WrongTrustRootError):
        bundle_sign(edited, keyring=checkpoint_keyring)  # the checkpoint key signs no bundle
    # A key of the checkpoint's bytes, or a fresh one, under the real export key id.
    checkpoint_bytes = SecretKey.from_b64(os.environ["RATCHET_CHECKPOINT_KEYS"].split(":", 1)[1])
    for forger in (checkpoint_bytes, SecretKey.generate()):
        forged = bundle_sign(edited, keyring=Keyring(TrustRoot.EXPORT, {"export-test-1": forger},
                                                     "export-test-1"))
        for findings in (bundle_verify(forged, checkpoint_keyring),
                         bundle_verify(forged, None, trust=_auditor())):
            assert findings == ["signature: signature does not verify: the data was altered or "
                                "signed with another key (key id export-test-1)"]
    # A worker holds the export root's public keys only: it gets no signer at all.
    monkeypatch.delenv("RATCHET_EXPORT_KEYS")
    with pytest.raises(KeyringError, match="cannot sign"):
        signer_for(TrustRoot.EXPORT)


def test_it_names_a_removed_last_event(bundle, checkpoint_keyring) -> None:
    cut = copy.deepcopy(bundle)
    cut["trace"].pop()
    findings = bundle_verify(bundle_sign(cut, keyring=_export_signer()), checkpoint_keyring)
    assert findings == [
        "trace: the chain ends at seq 5 but the run's head is seq 6: events were removed or added"
    ]


def test_it_names_an_older_checkpoint_offered_as_the_committed_one(
    bundle, checkpoint_keyring
) -> None:
    rolled = copy.deepcopy(bundle)
    older = rolled["checkpoints"][0]
    rolled["committed_checkpoint"] = {
        k: older[k] for k in ("generation", "digest", "key_id", "envelope")
    }
    findings = bundle_verify(bundle_sign(rolled, keyring=_export_signer()), checkpoint_keyring)
    assert "committed checkpoint: its digest is not the high-water mark's" in findings
    assert "committed checkpoint: its generation is not the high-water mark's" in findings


def test_it_names_an_envelope_that_does_not_open(bundle, checkpoint_keyring) -> None:
    forged = copy.deepcopy(bundle)
    entry = forged["checkpoints"][1]
    entry["envelope"] = entry["envelope"].replace('"cursor":0', '"cursor":1')
    findings = bundle_verify(forged, checkpoint_keyring)
    assert "checkpoint generation 2: envelope bytes do not hash to the recorded digest" in findings
    assert any(
        f.startswith("checkpoint generation 2: does not open: MAC does not verify")
        for f in findings
    )
    # Re-signed by the exporter, the envelope still does not hash to its digest nor open.
    findings = bundle_verify(bundle_sign(forged, keyring=_export_signer()), checkpoint_keyring)
    assert "checkpoint generation 2: envelope bytes do not hash to the recorded digest" in findings
    assert any(
        f.startswith("checkpoint generation 2: does not open: MAC does not verify")
        for f in findings
    )
    # An auditor without the checkpoint key still sees the digest mismatch.
    assert "checkpoint generation 2: envelope bytes do not hash to the recorded digest" in (
        bundle_verify(forged, None, trust=_auditor())
    )


def test_it_names_a_bundle_signed_with_a_key_it_does_not_trust(bundle) -> None:
    stranger_export = Keyring(TrustRoot.EXPORT, {"other": SecretKey.generate()}, "other").public()
    stranger = Keyring(TrustRoot.CHECKPOINT, {"other": SecretKey.generate()}, "other")
    findings = bundle_verify(bundle, stranger,
                             trust=dataclasses.replace(_auditor(), export=stranger_export))
    assert findings[0].startswith("signature: signed with a key id this trust root does not know")
    assert (
        "committed checkpoint: does not open: signed with a key id this trust root does not "
        "know" in findings
    )
    # A bundle signed by a stranger's export key, verified with the real keys.
    strangers = bundle_sign(bundle, keyring=Keyring(TrustRoot.EXPORT, {"other": SecretKey.generate()},
                                                    "other"))
    assert bundle_verify(strangers, None, trust=_auditor()) == [
        "signature: signed with a key id this trust root does not know (key id other)"
    ]


def test_it_still_verifies_after_the_signing_key_is_rotated(bundle, _keys) -> None:
    old_id, old_b64 = os.environ["RATCHET_CHECKPOINT_KEYS"].split(":", 1)  # set by conftest
    rotated = Keyring(
        TrustRoot.CHECKPOINT,
        {"new-k2": SecretKey.generate(), old_id: SecretKey.from_b64(old_b64)},
        "new-k2",
    )
    old_export = _keys["export"]
    rotated_export = Keyring(
        TrustRoot.EXPORT,
        {"export-k2": PublicKey.of(SecretKey.generate()),
         old_export.key_id: PublicKey.from_b64(old_export.public_b64)},
        "export-k2",
    )
    trust = dataclasses.replace(_auditor(), export=rotated_export)
    assert bundle_verify(bundle, rotated, trust=trust) == []
    assert bundle_verify(bundle, None, trust=trust) == []
    retired = dataclasses.replace(trust, export=rotated_export.without([old_export.key_id]))
    assert bundle_verify(bundle, None, trust=retired)[0].startswith(
        "signature: signed with a key id this trust root does not know"
    ), "a retired export key no longer vouches for anything"


def test_it_reports_a_mangled_bundle_instead_of_crashing(bundle, checkpoint_keyring) -> None:
    mangled = copy.deepcopy(bundle)
    del mangled["trace"][0]["created_at"]
    findings = bundle_verify(mangled, checkpoint_keyring)
    assert any(f.startswith("bundle: malformed") for f in findings)
    assert bundle_verify({"run": 3}, checkpoint_keyring)[-1] == "run: missing or malformed"


def test_it_refuses_a_checkpoint_keyring_of_another_trust_root(bundle) -> None:
    approval = Keyring(TrustRoot.APPROVAL, {"a": SecretKey.generate()}, "a")
    with pytest.raises(WrongTrustRootError):
        bundle_verify(bundle, approval)


def test_it_exports_no_bundle_for_a_run_whose_trace_chain_is_broken(checkpoint_keyring, db) -> None:
    build_run(checkpoint_keyring, run_id="run-broken", events=4)
    TraceEvent.objects.filter(run_id="run-broken", seq=2).update(payload={"edited": True})
    with pytest.raises(BundleExportError, match="trace hash chain does not verify"):
        bundle_export(run_id="run-broken")


def test_the_admin_downloads_it_from_the_run_page(client_for, checkpoint_keyring) -> None:
    build_run(checkpoint_keyring, run_id="run-dl", events=3)
    client = client_for("admin")
    page = client.get(reverse("review:run", args=["run-dl"])).content.decode()
    assert 'href="/runs/run-dl/bundle/" download' in page
    trace_page = client.get(reverse("review:trace") + "?run=run-dl").content.decode()
    assert 'href="/runs/run-dl/bundle/" download' in trace_page
    response = client.get(reverse("review:run-bundle", args=["run-dl"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="ratchet-bundle-run-dl.json"'
    downloaded = json.loads(response.content)
    assert downloaded["exported_by"] == "admin"
    assert bundle_verify(downloaded, checkpoint_keyring) == []
    operator_page = client_for("operator").get(reverse("review:run", args=["run-dl"]))
    assert "/bundle/" not in operator_page.content.decode(), "trace evidence is the admin's"


def test_the_download_says_why_when_the_evidence_does_not_verify(
    client_for, checkpoint_keyring
) -> None:
    build_run(checkpoint_keyring, run_id="run-bad", events=3)
    TraceEvent.objects.filter(run_id="run-bad", seq=3).update(event_type="edited")
    response = client_for("admin").get(reverse("review:run-bundle", args=["run-bad"]))
    assert response.status_code == 409
    assert b"trace hash chain does not verify" in response.content
