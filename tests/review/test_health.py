"""Health page: recovery success rate, recovery duration and duplicate submission count
(DESIGN.md section 8), computed from the trace."""

from __future__ import annotations

from django.urls import reverse

from runtime.models import Phase
from tests.review.rows import add_events, build_run


def test_it_shows_recovery_rate_duration_and_duplicates(
    client_for, checkpoint_keyring, personas
) -> None:
    run = build_run(checkpoint_keyring, run_id="run-a", events=0)
    for seconds in (1.0, 2.0, 3.0):
        add_events(run, 1, event_type="recovery.succeeded", payload={"duration_seconds": seconds})
    add_events(run, 1, event_type="recovery.failed", payload={"error": "lease held"})
    add_events(run, 1, event_type="audit.effects", payload={"duplicates": 2})
    page = client_for("reviewer").get(reverse("review:health")).content.decode()
    assert "75.0 %" in page and "3 succeeded, 1 failed of 4 recoveries" in page
    assert "2.00 s" in page, "median recovery duration"
    assert 'metric-value metric-bad">2<' in page and "one key, more than one effect" in page


def test_it_counts_runs_by_phase_and_live_runs_nobody_holds(
    client_for, checkpoint_keyring, personas
) -> None:
    build_run(checkpoint_keyring, run_id="run-held", phase=Phase.RUNNING.value, owner_worker="w1")
    build_run(checkpoint_keyring, run_id="run-orphaned", phase=Phase.RUNNING.value)
    build_run(
        checkpoint_keyring,
        run_id="run-expired",
        phase=Phase.PENDING.value,
        owner_worker="w2",
        lease_seconds=-60,
    )
    build_run(
        checkpoint_keyring, run_id="run-done", phase=Phase.COMPLETED.value, stop_reason="verified"
    )
    page = client_for("operator").get(reverse("review:health")).content.decode()
    assert "4 runs in total" in page
    assert "2 running or pending runs without a current lease" in page


def test_it_shows_dashes_before_any_recovery(client_for, personas) -> None:
    page = client_for("admin").get(reverse("review:health")).content.decode()
    assert "0 succeeded, 0 failed of 0 recoveries" in page
    assert ">exactly once<" in page
