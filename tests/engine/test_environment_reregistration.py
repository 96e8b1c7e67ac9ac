"""Story: a person re-registers an environment whose fence was raised outside the control plane
(DESIGN.md section 4.16).

Something the control plane never issued a token to raised the workspace's fence far ahead.
Before, the run froze, a replan froze it again and new runs there were refused, for good: only
editing the fence file helped. Now a person looks at the environment and signs a re-registration
with their own reviewer key: the control plane checks the signature and the key's owner, moves
the environment's counter up to the observed fence, traces the signed statement on every run of
the environment, and a replan then finishes the run. A statement signed with someone else's key,
an edited statement or an unknown environment changes nothing.
"""

from __future__ import annotations

import io
import json
import os
from datetime import datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from runtime.core.canonical import canonical_json
from runtime.core.signing import TrustRoot, parse_keyring_spec
from runtime.decisions.reviews import case_decide, decision_sign_for
from runtime.engine import run_advance, run_start
from runtime.errors import BadSignatureError, DecisionRefusedError
from runtime.keys import REVIEWER_KEY_FORMAT
from runtime.models import EnvironmentRegistration, ReviewCase, Run
from runtime.ownership.reregistration import environment_reregister, reregistration_sign
from tests.engine.support import run_target, trace_events
from tests.factories import write_scripted_task
from tests.helpers.keys import make_test_key

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [{"target": "a.txt", "content": "a\n"}, {"target": "b.txt", "content": "b\n"}]
FOREIGN_FENCE = 1_000_000


@pytest.fixture
def alice(monkeypatch):
    key = make_test_key(TrustRoot.REVIEWER, "reviewer-alice")
    verifying = os.environ.get("RATCHET_REVIEWER_PUBLIC_KEYS", "")
    monkeypatch.setenv("RATCHET_REVIEWER_PUBLIC_KEYS", ",".join(p for p in (verifying, key.public_spec) if p))
    monkeypatch.setenv("RATCHET_REVIEWER_KEY_NAMES", "reviewer-alice:alice")
    return key


def _fenced_out(tmp_path) -> tuple[str, str]:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS))
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    (run_target(run_id) / ".ratchet" / "fence").write_text(f"{FOREIGN_FENCE}\n", encoding="ascii")
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("needs_review", "adapter_refused")
    return run_id, Run.objects.get(run_id=run_id).environment_instance_id


def test_n11_a_signed_reregistration_lets_a_replan_finish_the_run(tmp_path, alice) -> None:
    run_id, instance = _fenced_out(tmp_path)
    ring = parse_keyring_spec(TrustRoot.REVIEWER, alice.spec)

    done = environment_reregister(signed=reregistration_sign(
        instance_id=instance, observed_fence=FOREIGN_FENCE, reviewer="alice",
        reason="restored control-plane database; the workspace is intact", keyring=ring))

    assert (done.token_after, done.runs_traced) == (FOREIGN_FENCE, (run_id,))
    assert EnvironmentRegistration.objects.get(instance_id=instance).fencing_token == FOREIGN_FENCE
    [event] = trace_events(run_id, "environment.reregistered")
    assert event["statement"]["reviewer"] == "alice" and event["signature"]["key_id"] == "reviewer-alice"
    assert event["token_before"] < FOREIGN_FENCE == event["token_after"]

    case = ReviewCase.objects.get(run_id=run_id, status="open")
    assert case_decide(decision=decision_sign_for(case_id=case.case_id, reviewer="alice", decision="replan",
                                                  keyring=ring)).applied
    assert run_advance(run_id=run_id).phase == "completed"
    assert (run_target(run_id) / "b.txt").read_text() == "b\n"


def test_n11_a_statement_signed_with_anothers_key_or_edited_changes_nothing(tmp_path, alice) -> None:
    run_id, instance = _fenced_out(tmp_path)
    ring = parse_keyring_spec(TrustRoot.REVIEWER, alice.spec)
    before = EnvironmentRegistration.objects.get(instance_id=instance).fencing_token

    misnamed = reregistration_sign(instance_id=instance, observed_fence=FOREIGN_FENCE, reviewer="bob",
                                   reason="looked at it", keyring=ring)
    with pytest.raises(DecisionRefusedError, match="bound to alice"):
        environment_reregister(signed=misnamed)
    edited = reregistration_sign(instance_id=instance, observed_fence=5, reviewer="alice", reason="looked",
                                 keyring=ring)
    edited["statement"]["observed_fence"] = FOREIGN_FENCE
    with pytest.raises(BadSignatureError):
        environment_reregister(signed=edited)
    unknown = reregistration_sign(instance_id="no-such-env", observed_fence=1, reviewer="alice", reason="x",
                                  keyring=ring)
    with pytest.raises(DecisionRefusedError, match="no such registered environment"):
        environment_reregister(signed=unknown)

    # Pre-dated to outlive the decision window: stamped an hour ahead of the database clock.
    ahead = reregistration_sign(instance_id=instance, observed_fence=FOREIGN_FENCE, reviewer="alice",
                                reason="looked at it", keyring=ring)["statement"]
    ahead["issued_at"] = (datetime.fromisoformat(ahead["issued_at"]) + timedelta(hours=1)).isoformat()
    signature = ring.sign(canonical_json(ahead))
    with pytest.raises(DecisionRefusedError, match="stamped in the future"):
        environment_reregister(signed={"statement": ahead,
                                       "signature": {"key_id": signature.key_id, "mac": signature.mac}})

    assert EnvironmentRegistration.objects.get(instance_id=instance).fencing_token == before
    assert trace_events(run_id, "environment.reregistered") == []


def test_n11_the_command_signs_with_the_persons_key_file(tmp_path, alice) -> None:
    run_id, instance = _fenced_out(tmp_path)
    key_file = tmp_path / "alice.key.json"
    key_file.write_text(json.dumps({"format": REVIEWER_KEY_FORMAT, "reviewer": "alice", "key_id": "reviewer-alice",
                                    "private": alice.b64}))
    out = io.StringIO()

    call_command("environments", "reregister", instance, "--key-file", str(key_file), "--observed-fence",
                 str(FOREIGN_FENCE), "--reason", "looked at the workspace", stdout=out)

    assert f"-> {FOREIGN_FENCE}" in out.getvalue()
    assert trace_events(run_id, "environment.reregistered")[0]["statement"]["reason"] == "looked at the workspace"
    with pytest.raises(CommandError, match="key file does not exist"):
        call_command("environments", "reregister", instance, "--key-file", str(tmp_path / "missing.json"),
                     "--observed-fence", "1", "--reason", "x", stdout=io.StringIO())
