"""A signed evidence bundle of a run verifies offline, and every kind of tampering with it is
named: the bundle MAC, an edited or removed trace event, a checkpoint envelope that does not open,
a committed checkpoint that is not the high-water mark's (issue: "export a signed evidence bundle
(JSON) that `manage.py verify-bundle FILE` checks offline"; DESIGN.md section 4)."""

from __future__ import annotations

import copy
import json
import os

import pytest
from django.urls import reverse

from runtime.bundle_verification import bundle_verify
from runtime.bundles import bundle_export, bundle_sign
from runtime.core.signing import Keyring, SecretKey, TrustRoot
from runtime.errors import BundleExportError, WrongTrustRootError
from runtime.models import TraceEvent
from tests.factories import make_state
from tests.review.rows import build_run, pending_state


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


def test_it_exports_a_bundle_that_verifies(bundle, checkpoint_keyring) -> None:
    assert bundle_verify(bundle, checkpoint_keyring) == []
    assert bundle["format"] == "ratchet-evidence-bundle/1"
    assert bundle["signature"]["key_id"] == "test-k1"
    assert bundle["run"]["run_id"] == "run-bundle" and bundle["exported_by"] == "admin"
    assert bundle["high_water_mark"]["generation"] == 3
    assert [c["committed"] for c in bundle["checkpoints"]] == [False, False, True]
    assert [e["seq"] for e in bundle["trace"]] == [1, 2, 3, 4, 5, 6]
    assert bundle["receipts"][0]["receipt"]["receipt_id"] == "rcpt-0001"
    json.dumps(bundle)  # plain JSON all the way down


def test_it_survives_a_json_round_trip(bundle, checkpoint_keyring) -> None:
    again = json.loads(json.dumps(bundle, indent=2))
    assert bundle_verify(again, checkpoint_keyring) == []


def test_it_names_an_edited_trace_event_even_when_the_bundle_is_re_signed(
    bundle, checkpoint_keyring
) -> None:
    edited = copy.deepcopy(bundle)
    edited["trace"][2]["payload"] = {"step": "something else"}
    findings = bundle_verify(edited, checkpoint_keyring)
    assert findings[0].startswith("signature: MAC does not verify")
    assert "trace: event seq 3 was altered after it was written" in findings
    # Whoever re-signs an edited bundle still cannot make the trace chain recompute.
    resigned = bundle_sign(edited, keyring=checkpoint_keyring)
    assert bundle_verify(resigned, checkpoint_keyring) == [
        "trace: event seq 3 was altered after it was written"
    ]


def test_it_names_a_removed_last_event(bundle, checkpoint_keyring) -> None:
    cut = copy.deepcopy(bundle)
    cut["trace"].pop()
    findings = bundle_verify(bundle_sign(cut, keyring=checkpoint_keyring), checkpoint_keyring)
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
    findings = bundle_verify(bundle_sign(rolled, keyring=checkpoint_keyring), checkpoint_keyring)
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


def test_it_names_a_bundle_signed_with_a_key_it_does_not_trust(bundle) -> None:
    stranger = Keyring(TrustRoot.CHECKPOINT, {"other": SecretKey.generate()}, "other")
    findings = bundle_verify(bundle, stranger)
    assert findings[0].startswith("signature: signed with a key id this trust root does not know")
    assert (
        "committed checkpoint: does not open: signed with a key id this trust root does not "
        "know" in findings
    )


def test_it_still_verifies_after_the_signing_key_is_rotated(bundle) -> None:
    old_id, old_b64 = os.environ["RATCHET_CHECKPOINT_KEYS"].split(":", 1)  # set by conftest
    rotated = Keyring(
        TrustRoot.CHECKPOINT,
        {"new-k2": SecretKey.generate(), old_id: SecretKey.from_b64(old_b64)},
        "new-k2",
    )
    assert bundle_verify(bundle, rotated) == []


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
