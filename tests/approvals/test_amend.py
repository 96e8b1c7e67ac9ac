"""Amend before approving: the amended action runs once, the original never (DESIGN.md section 6.13)."""

from __future__ import annotations

import copy
import time

import pytest

from runtime.bundles.export import bundle_export, bundle_sign
from runtime.bundles.verification import bundle_verify
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.ledger import state_ledger
from runtime.core.signing import TrustRoot
from runtime.database.clock import db_now
from runtime.decisions.amendments import amendment_preview, approval_amend, proposed_arguments
from runtime.engine import run_advance, run_start
from runtime.errors import AmendmentPolicyError, AmendmentRefusedError
from runtime.evidence.amendments import amendment_for
from runtime.evidence.attachments import attachment_get
from runtime.keys import signer_for
from runtime.models import TraceEvent
from tests.approvals.conftest import STEPS, ApprovalStory
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)

AMENDED = "max_orders = 2\n"


def _amend(story: ApprovalStory, **changes):
    item = story.waiting()
    _, arguments = proposed_arguments(run_id=story.run_id)
    return item, approval_amend(run_id=story.run_id, approver="olivia", arguments={**arguments, **changes},
                                proposed_intent_digest=item.intent_digest,
                                environment_fingerprint=item.environment_fingerprint, note="finance caps it at 2")


def test_it_executes_the_amended_action_once_and_never_the_original(story):
    item, outcome = _amend(story, content=AMENDED)
    assert (outcome.outcome, outcome.phase) == ("amended", "pending")
    assert outcome.amended_intent_digest != item.intent_digest

    report = run_advance(run_id=story.run_id, worker="worker-b")

    assert report.phase == "completed"
    assert (story.workspace / "limits.toml").read_text() == AMENDED
    [receipt] = [r for r in story.adapter().receipts() if r.idempotency_key == item.idempotency_key]
    assert receipt.intent_digest == outcome.amended_intent_digest  # same key, the amended intent
    written = state_ledger(checkpoint_verify(run_id=story.run_id).state).executed(item.idempotency_key)
    assert written.intent_digest == outcome.amended_intent_digest and not written.reconciled
    [event] = TraceEvent.objects.filter(run_id=story.run_id, event_type="intent.amended")
    assert event.payload["superseded"]["intent_digest"] == item.intent_digest
    assert event.payload["amendment"]["approval_id"] == outcome.approval_id
    diff = attachment_get(digest=event.payload["dry_run_diff"]).decode()
    assert "+max_orders = 2" in diff
    granted = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.granted")
    assert granted.payload["approval"]["intent_digest"] == outcome.amended_intent_digest
    found = amendment_for(run_id=story.run_id, idempotency_key=item.idempotency_key)
    assert (found.proposed["target"], found.executed_intent_digest, found.note) == (
        "limits.toml", outcome.amended_intent_digest, "finance caps it at 2")


def test_the_bundle_verifies_the_amendment_and_names_a_forged_one(story):
    _amend(story, content=AMENDED)
    run_advance(run_id=story.run_id, worker="worker-b")
    bundle = bundle_export(run_id=story.run_id)
    assert bundle_verify(bundle) == []
    forged = copy.deepcopy(bundle)
    [event] = [e for e in forged["trace"] if e["event_type"] == "intent.amended"]
    event["payload"]["amendment"]["approver"] = "mallory"

    findings = bundle_verify(bundle_sign(forged, keyring=signer_for(TrustRoot.EXPORT)))

    assert any(f.startswith(f"trace seq {event['seq']}: amendment: signature does not verify") for f in findings)


def test_a_preview_shows_the_amended_diff_and_changes_nothing(story):
    item = story.waiting()
    _, arguments = proposed_arguments(run_id=story.run_id)
    events = TraceEvent.objects.filter(run_id=story.run_id).count()

    preview = amendment_preview(run_id=story.run_id, arguments={**arguments, "content": AMENDED})

    assert preview.changed and preview.proposed_intent_digest == item.intent_digest
    assert "+max_orders = 2" in preview.dry_run_diff
    assert preview.environment_fingerprint == item.environment_fingerprint
    assert TraceEvent.objects.filter(run_id=story.run_id).count() == events
    assert story.waiting().intent_digest == item.intent_digest


@pytest.mark.parametrize(("changes", "why"), [
    ({"path": "../escape.toml"}, "not a valid write_file"),
    ({"path": ".git/config"}, "not a valid write_file"),
    ({"content": "x" * 1_000_001}, "not a valid write_file"),
    ({"mode": "0777"}, "not a valid write_file"),
])
def test_it_refuses_arguments_outside_the_policy_and_keeps_the_original(story, changes, why):
    item = story.waiting()
    with pytest.raises(AmendmentPolicyError, match=why):
        _amend(story, **changes)
    assert story.waiting().intent_digest == item.intent_digest
    refused = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.refused")
    assert refused.payload["action"] == "amend"
    assert not TraceEvent.objects.filter(run_id=story.run_id, event_type="intent.amended").exists()


def test_it_refuses_a_path_outside_the_policys_allowed_paths(tmp_path, ratchet_keys):
    spec = write_scripted_task(tmp_path, steps=STEPS, approval_risks=("high",))
    spec.write_text(spec.read_text().replace('allowed_paths = [ "**",]', 'allowed_paths = [ "*.toml", "notes.txt",]')
                    .replace('allowed_paths = ["**"]', 'allowed_paths = ["*.toml", "notes.txt"]'))
    run_id = run_start(spec_path=spec, worker="worker-a")
    assert run_advance(run_id=run_id, worker="worker-a").phase == "awaiting_approval"
    story = ApprovalStory(run_id=run_id, workspace=tmp_path / "ws")
    with pytest.raises(AmendmentPolicyError, match="allowed_paths"):
        _amend(story, path="config/limits.toml")
    assert story.waiting().action["target"] == "limits.toml"


def test_it_refuses_when_the_waiting_action_or_the_environment_moved(story):
    item = story.waiting()
    _, arguments = proposed_arguments(run_id=story.run_id)
    changed = {**arguments, "content": AMENDED}
    with pytest.raises(AmendmentRefusedError, match="not the one you amended"):
        approval_amend(run_id=story.run_id, approver="olivia", arguments=changed,
                       proposed_intent_digest="sha256:" + "1" * 64,
                       environment_fingerprint=item.environment_fingerprint)
    with pytest.raises(AmendmentRefusedError, match="environment changed"):
        approval_amend(run_id=story.run_id, approver="olivia", arguments=changed,
                       proposed_intent_digest=item.intent_digest, environment_fingerprint="sha256:" + "2" * 64)
    with pytest.raises(AmendmentRefusedError, match="nothing to amend"):
        approval_amend(run_id=story.run_id, approver="olivia", arguments=arguments,
                       proposed_intent_digest=item.intent_digest, environment_fingerprint=item.environment_fingerprint)
    assert story.waiting().intent_digest == item.intent_digest
    assert TraceEvent.objects.filter(run_id=story.run_id, event_type="approval.refused").count() == 3


def test_a_second_amend_after_approval_is_refused(story):
    _amend(story, content=AMENDED)
    with pytest.raises(AmendmentRefusedError, match="not waiting for an approval"):
        proposed_arguments(run_id=story.run_id)


def test_an_amended_approval_that_expires_waits_again_with_the_amended_action_and_diff(story):
    item = story.waiting()
    _, arguments = proposed_arguments(run_id=story.run_id)
    outcome = approval_amend(run_id=story.run_id, approver="olivia", arguments={**arguments, "content": AMENDED},
                             proposed_intent_digest=item.intent_digest,
                             environment_fingerprint=item.environment_fingerprint, ttl_seconds=1)
    deadline = time.monotonic() + 60
    while db_now() <= outcome.expires_at and time.monotonic() < deadline:
        time.sleep(0.2)
    assert db_now() > outcome.expires_at, "the approval did not expire by the database clock"

    report = run_advance(run_id=story.run_id, worker="worker-b")

    assert (report.phase, report.stop_reason) == ("awaiting_approval", "approval_expired")
    again = story.waiting()
    [amended] = TraceEvent.objects.filter(run_id=story.run_id, event_type="intent.amended")
    assert again.intent_digest == outcome.amended_intent_digest
    assert again.dry_run_diff == amended.payload["dry_run_diff"], "the queue shows the amended diff"
    assert not (story.workspace / "limits.toml").exists() and story.effects_for(item.idempotency_key) == 0
