"""A thousand finished runs archived beside a live run, the pass SIGKILLed from outside midway
and run again (DESIGN.md section 4.11): the database gives back what they held, every bundle
verifies with public keys only, the runs list shows them all, and the live run is untouched and
completes. Slow (minutes); the quick subset is ``test_archive.py``."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from django.core.management import call_command

from review.queries.runs_list import RUNS_PER_PAGE, RunFilters, run_list
from runtime.archive.verify import archived_bundle_findings
from runtime.bench.storage import database_bytes
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance
from runtime.models import Run
from tests.archive.support import finished_runs, held_rows, live_run, state_of, waiting_item
from tests.helpers.procs import MANAGE, ROOT, child_env, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(3600)]

RUNS = 1000


def _listed() -> set[str]:
    seen: set[str] = set()
    cursor = ""
    while True:
        page = run_list(filters=RunFilters(), cursor=cursor)
        seen.update(row.run.run_id for row in page.rows)
        assert all(row.checkpoint.label == "archived" for row in page.rows if row.run.archived_at)
        if not page.next_cursor:
            return seen
        assert len(page.rows) == RUNS_PER_PAGE
        cursor = page.next_cursor


def test_a_thousand_runs_archive_with_a_kill_midway(tmp_path, ratchet_keys):
    keys = tmp_path / "public-keys.json"
    call_command("keys", "export-public", "--out", str(keys))
    done = finished_runs(tmp_path, RUNS, writes=1)
    live = live_run(tmp_path)
    live_before = held_rows(live)
    before = database_bytes()
    proc = subprocess.Popen([sys.executable, str(MANAGE), "archive", "--older-than", "0.001s", "--apply"],
                            env=child_env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: Run.objects.filter(archived_at__isnull=False).count() >= RUNS // 3, timeout=1800,
                 what="a third of the runs archived")
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    states = [state_of(run_id) for run_id in done]
    assert "HALF" not in states and 0 < states.count("archived") < RUNS
    call_command("archive", "--older-than", "0.001s", "--apply")
    after = database_bytes()
    assert [state_of(run_id) for run_id in done] == ["archived"] * RUNS
    assert all(archived_bundle_findings(run_id=run_id, public_keys=keys) == [] for run_id in done)
    assert set(done) | {live} <= _listed()
    # What the thousand held is given back: what remains is about one run row each.
    assert after < before / 2, (before, after)
    assert held_rows(live) == live_before and state_of(live) == "intact"
    item = waiting_item(live)
    approval_grant(run_id=live, approver="olivia", environment_fingerprint=item.environment_fingerprint)
    assert run_advance(run_id=live, worker="w-live").phase == "completed"
    print(f"\narchive of {RUNS} runs: database {before} -> {after} bytes")
