"""An operator cancels a live run from its page: the request is recorded with who asked, and the
worker driving the run settles any pending write before it stops (DESIGN.md section 6.1)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.factories import write_scripted_task
from tests.review.stories import CONFLICT_STEPS, completed_run, events, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def live(tmp_path, ratchet_keys) -> str:  # type: ignore[no-untyped-def]
    spec = write_scripted_task(tmp_path, steps=CONFLICT_STEPS)
    run_id = run_start(spec_path=spec, worker="story-worker")
    assert run_advance(run_id=run_id, worker="story-worker", max_steps=1).phase == "pending"
    return run_id


def test_it_shows_the_cancel_button_on_live_runs_to_operators_only(client_for, live) -> None:
    url = reverse("review:run", args=[live])
    assert f'action="/runs/{live}/cancel/"' in client_for("operator").get(url).content.decode()
    assert "/cancel/" not in client_for("reviewer").get(url).content.decode()


def test_it_records_the_request_and_the_worker_cancels_after_settling(client_for, live) -> None:
    response = client_for("operator").post(reverse("review:run-cancel", args=[live]), follow=True)
    assert response.redirect_chain == [(reverse("review:run", args=[live]), 303)]
    html = response.content.decode()
    assert "Cancellation requested" in messages(html)[0]
    assert "/cancel/" not in html.split('id="run-status"')[1].split("</section>")[0]
    assert Run.objects.get(run_id=live).cancel_requested
    [requested] = events(live, "run.cancel_requested")
    assert requested["requested_by"] == "operator"
    assert run_advance(run_id=live).phase == "cancelled"


def test_it_refuses_to_cancel_a_run_that_is_not_live(client_for, tmp_path, ratchet_keys) -> None:
    done = completed_run(tmp_path / "done")
    response = client_for("operator").post(reverse("review:run-cancel", args=[done]), follow=True)
    assert "there is nothing to cancel" in messages(response.content.decode())[0]
    assert phase(done) == "completed" and not events(done, "run.cancel_requested")


def test_it_cancels_a_run_frozen_for_approval_at_once(client_for, tmp_path, ratchet_keys) -> None:
    from tests.review.stories import approval_run

    waiting = approval_run(tmp_path / "waiting")
    url = reverse("review:run", args=[waiting])
    assert f'action="/runs/{waiting}/cancel/"' in client_for("operator").get(url).content.decode()
    response = client_for("operator").post(reverse("review:run-cancel", args=[waiting]), follow=True)
    assert "Run cancelled" in messages(response.content.decode())[0]
    assert phase(waiting) == "cancelled"
    [cancelled] = events(waiting, "run.cancelled")
    assert cancelled["reason"] == "cancelled"
