"""A worker holds only the public keys of the approval root: whatever it mints, the runtime refuses
(otherwise anyone who can run a worker could approve; DESIGN.md sections 2.2 and 4.1)."""

from __future__ import annotations

import pytest

from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.checkpoints.approval_checks import evidence_findings
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import ApprovalEvidence
from runtime.core.evidence import approval_verify
from runtime.core.signing import TrustRoot
from runtime.engine import run_advance
from runtime.errors import SigningError
from runtime.keys import keyring_for
from runtime.models import TraceEvent
from tests.evidence.support import run_forger, worker_env
from tests.helpers.procs import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_refuses_an_approval_minted_by_a_worker(story, tmp_path):
    item = story.waiting()
    child = run_forger("approval", "--run-id", story.run_id, env=worker_env(tmp_path))
    assert child.returncode == 0, child.stderr
    outcomes = {e["attempt"]: e for e in child.events}
    # The approval service and the signer lookup refuse a process without the private key.
    assert outcomes["approval_grant"] == {"attempt": "approval_grant", "outcome": "refused", "error": "KeyringError"}
    assert outcomes["signer_for"]["error"] == "KeyringError"
    # Forged with the checkpoint key's bytes or a fresh key under the real key id: neither verifies.
    ring = keyring_for(TrustRoot.APPROVAL)
    for name in ("forged_approval_0", "forged_approval_1"):
        forged = ApprovalEvidence.model_validate(outcomes[name]["approval"], strict=False)
        assert forged.key_id == ring.current_key_id
        with pytest.raises(SigningError):
            approval_verify(forged, ring)
    # The worker could commit the forged approval (it holds the checkpoint key and the lease)...
    assert outcomes["commit_forged_approval"]["outcome"] == "committed"
    # ...but no runtime process accepts it: resume fails closed and the write never happens.
    with pytest.raises(SigningError):
        run_advance(run_id=story.run_id, worker="worker-b")
    assert not (story.workspace / "limits.toml").exists()
    assert story.effects_for(item.idempotency_key) == 0
    assert TraceEvent.objects.filter(run_id=story.run_id, event_type="approval.granted").count() == 1


def test_checkpoint_verify_and_verify_bundle_report_a_forged_approval(story, tmp_path):
    run_forger("approval", "--run-id", story.run_id, env=worker_env(tmp_path))
    state = checkpoint_verify(run_id=story.run_id).state  # the HMAC alone still verifies
    [finding] = evidence_findings(state)
    assert finding.startswith(f"approval {state.pending.approval.approval_id}: signature does not verify")
    checked = run_manage("checkpoint", "verify", story.run_id)
    assert checked.returncode != 0
    assert "checkpoint evidence does NOT verify" in checked.stderr and "signature does not verify" in checked.stderr

    bundle = bundle_export(run_id=story.run_id)
    findings = bundle_verify(bundle)
    assert any(f.startswith("committed checkpoint: approval ") for f in findings), findings
    assert any(f.startswith("trace seq ") and "approval" in f for f in findings), findings
