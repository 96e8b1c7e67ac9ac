"""Story: a bundle whose checkpoint carries a forged reviewer decision, re-signed by the exporter.

The export signature only says the exporter vouches for the bytes; each approval and decision
sealed inside a checkpoint is checked on its own with the reviewer and approval roots' public
keys (DESIGN.md section 4.8). Here an insider with the export key edits the decision inside the
committed checkpoint (the reviewer it names), fixes every digest that points at it and signs the
bundle again: the auditor, holding public keys only, still names the forged decision.
"""

from __future__ import annotations

import copy
import json

import pytest

from runtime.bundles.export import bundle_export, bundle_sign
from runtime.bundles.verification import bundle_trust, bundle_verify
from runtime.core.canonical import digest_bytes
from runtime.core.signing import TrustRoot
from runtime.decisions.reviews import case_decide, decision_sign_for
from runtime.engine import run_start
from runtime.keys import signer_for
from runtime.models import ReviewCase
from tests.cases.conftest import STEPS, freeze_on_conflict
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


def _decided_bundle(tmp_path) -> tuple[dict, str]:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS), worker="worker-a")
    freeze_on_conflict(run_id, tmp_path / "ws")
    case = ReviewCase.objects.get(run_id=run_id, status="open")
    outcome = case_decide(decision=decision_sign_for(case_id=case.case_id, reviewer="rex", decision="abort"))
    assert outcome.applied
    return bundle_export(run_id=run_id, exported_by="auditor-test"), case.case_id


def _forge_committed(bundle: dict, edit) -> dict:  # type: ignore[no-untyped-def]
    forged = copy.deepcopy(bundle)
    committed = forged["committed_checkpoint"]
    envelope = json.loads(committed["envelope"])
    edit(envelope["payload"])
    text = json.dumps(envelope, sort_keys=True, separators=(",", ":"))
    new = digest_bytes(text.encode())
    for entry in [committed, *[e for e in forged["checkpoints"] if e.get("committed")]]:
        entry["envelope"], entry["digest"] = text, new
    forged["high_water_mark"]["checkpoint_digest"] = new
    return bundle_sign(forged, keyring=signer_for(TrustRoot.EXPORT))


def test_it_names_a_forged_decision_sealed_inside_a_re_signed_checkpoint(tmp_path, ratchet_keys) -> None:
    bundle, case_id = _decided_bundle(tmp_path)
    trust = bundle_trust()
    assert bundle_verify(bundle, None, trust=trust) == []

    def rename_reviewer(payload: dict) -> None:
        [ref] = [r for r in payload["review_cases"] if r["case_id"] == case_id]
        ref["decision"]["reviewer"] = "mallory"

    findings = bundle_verify(_forge_committed(bundle, rename_reviewer), None, trust=trust)

    assert any(f.startswith(f"committed checkpoint: decision on {case_id}") for f in findings), findings
    assert not any(f.startswith("signature:") for f in findings), "the export signature itself is valid"
