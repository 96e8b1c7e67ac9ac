"""Story: Prometheus scrapes /metrics and sees what recovery-stats computes (DESIGN.md section 8.1).

The counters move in the transactions that append the events, so after real runs (a clean
recovery, a recovery that froze two checkpoints later, a run without a crash) the scrape,
parsed by prometheus_client's own text parser, gives the same figures as the whole-trace
computation -- without reading the trace.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from runtime.engine import run_advance, run_start
from runtime.observability.stats import recovery_stats
from tests.engine.support import run_target
from tests.helpers.procs import run_killed_at

pytestmark = pytest.mark.django_db(transaction=True)



def _scrape(client: Client, **headers: str) -> dict[str, float]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            key = sample.name if sample.name.endswith(("_sum", "_count", "_total")) or "le" not in sample.labels \
                else f"{sample.name}{{le={sample.labels['le']}}}"
            if sample.name == "ratchet_runs":
                key = f"ratchet_runs{{phase={sample.labels['phase']}}}"
            totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def test_it_serves_the_counters_recovery_stats_computes(replay_task: Path, workspace_task: Path) -> None:
    clean = run_killed_at(replay_task, "engine.after_execute:2")
    assert run_advance(run_id=clean, wait_seconds=10).phase == "completed"
    # the first receipt committed alone (one commit per write off in the child, DESIGN.md section
    # 4.13), so the recovered run's first step proposes and writes nothing
    frozen = run_killed_at(replay_task, "engine.after_step_commit", RATCHET_FOLD_INTENTS="0")
    run_advance(run_id=frozen, wait_seconds=10, max_steps=1)
    (run_target(frozen) / "README.md").write_text("edited before the recovered run wrote anything\n")
    assert run_advance(run_id=frozen, wait_seconds=10).phase == "needs_review"
    assert run_advance(run_id=run_start(spec_path=workspace_task)).phase == "completed"

    scraped = _scrape(Client())
    stats = recovery_stats()

    assert (stats.recoveries, stats.succeeded, stats.failed, stats.frozen) == (2, 1, 1, 1)
    assert scraped["ratchet_recoveries_started_total"] == stats.recoveries + stats.open
    assert scraped["ratchet_recoveries_succeeded_total"] == stats.succeeded
    assert scraped["ratchet_recoveries_failed_total"] == stats.failed
    assert scraped["ratchet_recoveries_frozen_total"] == stats.frozen
    assert scraped["ratchet_duplicate_submissions_total"] == stats.duplicate_submissions == 0
    assert scraped["ratchet_audited_runs_total"] == stats.audited_runs
    assert scraped["ratchet_recovery_duration_seconds_count"] == stats.succeeded
    assert scraped["ratchet_recovery_duration_seconds_sum"] == pytest.approx(stats.duration_median_seconds)
    assert scraped["ratchet_review_cases_opened_total"] == 1
    assert scraped["ratchet_lease_takeovers_total"] == 2
    assert scraped["ratchet_runs_started_total"] == 3
    assert (scraped["ratchet_runs{phase=completed}"], scraped["ratchet_runs{phase=needs_review}"]) == (2, 1)


def test_it_refuses_a_scrape_from_the_network_without_a_token() -> None:
    assert Client(REMOTE_ADDR="192.0.2.7").get("/metrics").status_code == 403
    assert Client().get("/metrics").status_code == 200  # loopback


def test_it_requires_the_bearer_token_when_one_is_set(settings) -> None:
    settings.RATCHET_METRICS_TOKEN = "s3cret-metrics-token"
    remote = Client(REMOTE_ADDR="192.0.2.7")

    refused = remote.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong")
    served = remote.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token")

    assert (refused.status_code, Client().get("/metrics").status_code, served.status_code) == (401, 401, 200)
    assert b"s3cret" not in refused.content
