"""Story: an admin manages version combinations from the dashboard (DESIGN.md section 8.4).

The combinations page lists each combination with its state, share, runs in flight and canary
metrics. Promoting a canary goes through the same service as ``manage.py combinations promote``
and is refused with the rule that fails; rolling one back (after an explicit confirmation) stops
its new runs, lists its in-flight runs with their pending side effects, traces the rollback in
each of them, and the runs' evidence bundles carry the combination's history.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse

from runtime.bundles.export import bundle_export
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.engine import run_advance, run_start
from runtime.models import CombinationEvent
from runtime.rollout.combinations import combination_get, combination_of_run, combination_register
from tests.engine.support import trace_events, write_scripted_task
from tests.review.conftest import client_for, personas, roles

__all__ = ["client_for", "personas", "roles"]

pytestmark = pytest.mark.django_db(transaction=True)


def _canary_with_a_pending_run(tmp_path: Path) -> tuple[str, str, str, str]:
    """``(old run, old combination, canary, canary run stopped before its second write)``."""
    old_run = run_start(spec_path=write_scripted_task(tmp_path / "old"))
    old = combination_of_run(run_id=old_run)
    fields = dict(old.fields, code_version="canary-build")
    canary = combination_register(fields=fields, state="canary", share=1.0, actor="ops",
                                  reason="new build").combination_id
    on_canary = run_start(spec_path=write_scripted_task(tmp_path / "canary"))
    assert run_advance(run_id=on_canary, max_steps=1).phase == "pending"
    return old_run, old.combination_id, canary, on_canary


def test_the_page_lists_each_combination_with_state_share_runs_in_flight_and_metrics(
        tmp_path: Path, client_for) -> None:
    _, old, canary, _ = _canary_with_a_pending_run(tmp_path)

    page = client_for("admin").get(reverse("review:combinations")).content.decode()

    for combination_id, state, share in ((old, "active", "the rest"), (canary, "canary", "1")):
        row = page.split(f'data-combination="{combination_id}"', 1)[1].split("</tr>", 1)[0]
        assert f">{state}<" in row
        cells = re.findall(r'<td class="num">([^<]*)</td>', row)
        assert cells[:3] == [share, "1", "1"], "share, runs in flight, runs"
    assert client_for("operator").get(reverse("review:combinations")).status_code == 403


def test_a_promotion_is_refused_with_the_rule_that_fails(tmp_path: Path, client_for) -> None:
    _, _, canary, _ = _canary_with_a_pending_run(tmp_path)

    response = client_for("admin").post(reverse("review:combination-promote", args=[canary]),
                                        {"reason": "looks fine", "share": "1"}, follow=True)

    assert "promotion refused" in response.content.decode()
    assert "no passing `manage.py regress` record" in response.content.decode()
    assert combination_get(combination_id=canary).state == "canary"


def test_a_rollback_from_the_dashboard_lists_in_flight_runs_and_reaches_trace_and_bundle(
        tmp_path: Path, client_for) -> None:
    old_run, old, canary, on_canary = _canary_with_a_pending_run(tmp_path)
    pending_key = checkpoint_verify(run_id=on_canary).state.pending.idempotency_key
    admin = client_for("admin")
    url = reverse("review:combination-rollback", args=[canary])

    unconfirmed = admin.post(url, {"reason": "canary misbehaves"}, follow=True)
    assert "Nothing was changed" in unconfirmed.content.decode()
    assert combination_get(combination_id=canary).state == "canary"

    page = admin.post(url, {"reason": "canary misbehaves", "confirm": "on"}, follow=True).content.decode()

    assert combination_get(combination_id=canary).state == "rolled_back"
    assert "1 run(s) in flight, 1 with pending side effects" in page
    assert reverse("review:run", args=[on_canary]) in page and pending_key in page
    entry = CombinationEvent.objects.get(combination_id=canary, kind="rolled_back")
    assert (entry.actor, entry.reason) == ("admin", "canary misbehaves")
    assert entry.payload["in_flight"] == [{"run_id": on_canary, "phase": "pending", "pending": [pending_key]}]
    assert trace_events(on_canary, "combination.rolled_back")[0]["pending"] == [pending_key]
    history = bundle_export(run_id=on_canary)["rollout"]["combination"]
    assert (history["combination_id"], history["state"]) == (canary, "rolled_back")
    assert [e["kind"] for e in history["history"]] == ["registered", "rolled_back"]
    # The run pinned to the old combination keeps running.
    assert run_advance(run_id=old_run).phase == "completed"
    assert combination_get(combination_id=old).state == "active"
