"""Story: an operator reads the health page's charts (uPlot, served from ``static/``, drawn under
the strict CSP from the page's JSON block), switches to seven days, opens the workers and queues
view, and sorts the runs list (DESIGN.md sections 6.6 and 6.8)."""

from __future__ import annotations

import pytest

from runtime.models import MetricCounter, Run
from runtime.observability.metrics import metrics_bucket_start
from tests.browser.support import Story

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _counters() -> None:
    now = metrics_bucket_start()
    cells = []
    for hours_ago in range(0, 20, 2):
        start = now - hours_ago * 3600
        cells += [("recoveries_succeeded", "", 4 + hours_ago % 3), ("recoveries_failed", "", hours_ago % 4 == 0),
                  ("recovery_duration_bucket", "1", 3), ("recovery_duration_bucket", "5", 1),
                  ("recovery_duration_count", "", 4), ("recovery_duration_sum", "", 6.5 + hours_ago / 4),
                  ("duplicate_submissions", "", 1 if hours_ago == 6 else 0),
                  ("approvals_requested", "", 2), ("approvals_expired", "", hours_ago % 6 == 0)]
        MetricCounter.objects.bulk_create([
            MetricCounter(name=name, tenant_id="acme", task_id="deploy", label=label, window_start=start,
                          value=float(value)) for name, label, value in cells])
        cells = []


def test_an_operator_reads_the_charts_and_the_workers_view(browser, stack, users) -> None:
    _counters()
    for n, phase in enumerate(("cancelled", "completed", "failed")):  # none the stack's worker drives
        Run.objects.create(run_id=f"chart-run-{n}", tenant_id="acme", task_id="deploy", task_version="1",
                           policy_id="p", policy_version="1", environment_instance_id=f"env-{n}",
                           scenario_fingerprint="sha256:" + "0" * 64, phase=phase, owner_worker=f"worker-{n}")
    story = Story(browser, stack.base_url, "health-charts")
    problems: list[str] = []
    story.page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    try:
        story.sign_in("operator-ann")
        story.page.goto(f"{stack.base_url}/health/")
        story.page.wait_for_selector("[data-charts][data-drawn='1']")
        assert story.page.locator("[data-chart] canvas").count() == 4, "four charts drawn"
        assert "49 succeeded, 5 failed of 54 recoveries" in story.page.inner_text("section.metrics")
        story.page.click("details.chart-table summary")
        assert story.page.locator("details.chart-table tbody tr").count() == 10
        story.shot("health-24h")
        story.page.click("nav.range-choice a:has-text('last 7d')")
        story.page.wait_for_selector("[data-charts][data-drawn='1']")
        assert story.page.locator("[data-chart] canvas").count() == 4
        story.shot("health-7d")
        story.open("/workers/", "workers")
        assert "Queues" in story.page.inner_text("main")
        story.page.goto(f"{stack.base_url}/?sort=-updated")
        assert story.page.locator("th[aria-sort='descending']").inner_text().lower().startswith("updated")
        story.shot("runs-sorted")
        assert not [p for p in problems if "Content Security Policy" in p or "Refused" in p], problems
    finally:
        story.close()
