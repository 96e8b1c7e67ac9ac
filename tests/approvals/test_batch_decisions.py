"""Story: five waiting approvals decided in one action, one of them stale (DESIGN.md section 6.15).

Each item is decided on its own, bound to its own intent digest and environment fingerprint: the
stale one (its environment changed after the approver looked) is refused and reported, the other
four are approved with the approver's comment signed into each, and each runs its write once.
"""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runtime.core.evidence import approval_verify
from runtime.core.signing import TrustRoot
from runtime.decisions.approvals import approvals_waiting
from runtime.decisions.batch import BatchItem, approvals_batch_decide
from runtime.engine import run_advance, run_start
from runtime.errors import BadSignatureError
from runtime.keys import keyring_for
from runtime.models import TraceEvent
from tests.approvals.conftest import STEPS, ApprovalStory
from tests.engine.support import restore
from tests.factories import write_scripted_task
from tests.review.stories import expired_approval_run

pytestmark = pytest.mark.django_db(transaction=True)

COMMENT = "fine for the Q3 limits review"


def _five_waiting(tmp_path: Path) -> list[ApprovalStory]:
    stories = []
    for n in range(5):
        spec = write_scripted_task(tmp_path / f"r{n}", steps=STEPS, approval_risks=("high",))
        run_id = run_start(spec_path=spec, worker="worker-a")
        assert run_advance(run_id=run_id, worker="worker-a").phase == "awaiting_approval"
        stories.append(ApprovalStory(run_id=run_id, workspace=tmp_path / f"r{n}" / "ws"))
    return stories


def _items(stories: list[ApprovalStory]) -> list[BatchItem]:
    return [BatchItem(run_id=w.run_id, intent_digest=w.intent_digest, environment_fingerprint=w.environment_fingerprint)
            for w in approvals_waiting(run_ids=[s.run_id for s in stories])]


def test_one_stale_item_is_reported_and_the_other_four_are_approved(tmp_path, ratchet_keys):
    stories = _five_waiting(tmp_path)
    items = _items(stories)
    stale = stories[2]
    (stale.workspace / "touched.txt").write_text("changed after the approver looked\n")

    results = approvals_batch_decide(items=items, approver="olivia", decision="approve", comment=COMMENT)

    by_run = {r.run_id: r for r in results}
    assert [r.run_id for r in results] == [i.run_id for i in items], "one result per item, in order"
    assert [s.run_id for s in stories if by_run[s.run_id].ok] == [s.run_id for s in stories if s is not stale]
    assert {by_run[s.run_id].outcome for s in stories if s is not stale} == {"granted"}
    refused = by_run[stale.run_id]
    assert (refused.ok, refused.error) == (False, "ApprovalRefusedError")
    assert "environment changed since you looked" in refused.message
    assert restore(stale.run_id).state.phase.value == "awaiting_approval"
    assert TraceEvent.objects.filter(run_id=stale.run_id, event_type="approval.refused").count() == 1

    keyring = keyring_for(TrustRoot.APPROVAL, create=False)
    for story in stories:
        if story is stale:
            continue
        evidence = restore(story.run_id).state.pending.approval
        assert (evidence.comment, evidence.approver) == (COMMENT, "olivia")
        approval_verify(evidence, keyring)  # the comment is under the signature
        granted = TraceEvent.objects.get(run_id=story.run_id, event_type="approval.granted").payload
        assert granted["comment"] == COMMENT and granted["approval"]["comment"] == COMMENT
        assert run_advance(run_id=story.run_id, worker="worker-b").phase == "completed"
        assert story.effects_for(evidence.idempotency_key) == 1


def test_an_altered_comment_breaks_the_signature(tmp_path, ratchet_keys):
    [story] = _five_waiting(tmp_path)[:1]
    [item] = _items([story])
    approvals_batch_decide(items=[item], approver="olivia", decision="approve", comment=COMMENT)
    evidence = restore(story.run_id).state.pending.approval
    with pytest.raises(BadSignatureError):
        approval_verify(evidence.model_copy(update={"comment": "anything goes"}),
                        keyring_for(TrustRoot.APPROVAL, create=False))


def test_a_batch_denial_with_feedback_lets_each_run_go_on(tmp_path, ratchet_keys):
    stories = _five_waiting(tmp_path)[:2]
    results = approvals_batch_decide(items=_items(stories), approver="olivia", decision="deny",
                                     reason="limits are owned by finance", mode="continue")
    assert [(r.ok, r.outcome, r.phase) for r in results] == [(True, "denied_with_feedback", "running")] * 2
    for story in stories:
        assert run_advance(run_id=story.run_id, worker="worker-b").phase == "completed"
        assert not (story.workspace / "limits.toml").exists()


def test_the_command_decides_each_item_and_fails_naming_the_stale_one(tmp_path, ratchet_keys):
    stories = _five_waiting(tmp_path)[:3]
    listing = tmp_path / "waiting.jsonl"
    listing.write_text("\n".join(json.dumps(w.as_dict(), default=str)
                                 for w in approvals_waiting(run_ids=[s.run_id for s in stories])))
    (stories[0].workspace / "touched.txt").write_text("changed\n")
    out = StringIO()
    with pytest.raises(CommandError, match=f"1 of 3 item\\(s\\) refused.*{stories[0].run_id}"):
        call_command("approvals", "batch", "approve", "--approver", "olivia", "--from", str(listing),
                     "--comment", COMMENT, stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["run_id"]: r["ok"] for r in lines} == {s.run_id: s is not stories[0] for s in stories}
    assert restore(stories[1].run_id).state.pending.approval.comment == COMMENT


def test_the_command_refreshes_an_expired_approval_as_the_dashboards_batch_may(tmp_path, ratchet_keys):
    run_id = expired_approval_run(tmp_path)
    [item] = approvals_waiting(run_ids=[run_id])
    out = StringIO()
    call_command("approvals", "batch", "approve", "--approver", "olivia",
                 "--item", run_id, item.intent_digest, item.environment_fingerprint, stdout=out)
    [line] = [json.loads(text) for text in out.getvalue().splitlines()]
    assert (line["ok"], line["outcome"]) == (True, "refreshed")
    assert restore(run_id).state.pending.approval.approver == "olivia"
    assert run_advance(run_id=run_id, worker="worker-b").phase == "completed"
