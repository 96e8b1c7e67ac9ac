"""A write that needs approval causes zero side effects without one (DESIGN.md section 8)."""

import pytest

from runtime.engine import run_advance

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_causes_zero_side_effects_without_approval(story):
    item = story.waiting()
    assert item.approval_state == "none"
    assert not (story.workspace / "limits.toml").exists()
    assert story.effects_for(item.idempotency_key) == 0
    # Driving the run again does not execute it either.
    report = run_advance(run_id=story.run_id, worker="worker-b")
    assert report.phase == "awaiting_approval"
    assert report.steps == 0
    assert not (story.workspace / "limits.toml").exists()
    assert len(story.adapter().receipts()) == 1  # only the low-risk note


def test_it_attaches_a_dry_run_diff(story):
    from runtime.evidence.attachments import attachment_get

    item = story.waiting()
    diff = attachment_get(digest=item.dry_run_diff).decode()
    assert "+max_orders = 3" in diff
