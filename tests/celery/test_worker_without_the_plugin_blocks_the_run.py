"""Story: a worker that predates a plug-in blocks the run instead of failing its recovery.

A worker dies mid-run; the worker that takes over was started without the run's planner (as a
worker started before the plug-in was installed). It traces ``run.blocked`` with the hint to
restart workers and gives the run back: no ``recovery.failed``, the recovery success rate is not
lowered, ``ratchet_runs_blocked_total`` counts it. A worker started with the plug-in picks the run
up from its start-up sweep (although the periodic retry of blocked runs is an hour away) and
completes it, one effect per write (DESIGN.md section 5.14).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.engine import run_start
from runtime.models import MetricCounter, Run, TraceEvent
from runtime.observability.stats import recovery_stats
from runtime.workers.sweeper import runs_needing_recovery
from tests.celery.support import ROOT, Worker, wait_for_phase
from tests.helpers.procs import KILLED
from tests.plugins.support import notes_task, require_example_package, store

pytestmark = pytest.mark.django_db(transaction=True)

NOTES = 4
PLUGIN_MODULE = "late_notes_plugin"
NO_BEAT = {"RATCHET_SWEEP_SECONDS": "3600", "RATCHET_BLOCKED_RETRY_SECONDS": "3600"}


def _late_plugin(directory: Path) -> Path:
    """A planner module outside any installed distribution: importable only where the
    directory is on the path (the "installed after the worker started" stand-in)."""
    plugins = directory / "late-plugins"
    plugins.mkdir()
    (plugins / f"{PLUGIN_MODULE}.py").write_text(
        "from ratchet_example_agent.planner import NoteTaker as LateNoteTaker\n", encoding="utf-8")
    return plugins


def _wait(condition: Callable[[], object], *, timeout: float, what: str, workers: list[Worker]) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {w.name} ---\n{w.output()[-4000:]}" for w in workers)
            raise AssertionError(f"no {what} after {timeout} s\n{logs}")
        time.sleep(0.1)


def test_a_worker_without_the_plugin_blocks_the_run_and_never_fails_its_recovery(
    tmp_path: Path, workers: Callable[..., Worker], send: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_example_package()
    plugins = _late_plugin(tmp_path)
    monkeypatch.syspath_prepend(str(plugins))
    task = notes_task(tmp_path, notes=NOTES, planner=f'kind = "python"\nentry = "{PLUGIN_MODULE}:LateNoteTaker"')
    run_id = run_start(spec_path=task)
    with_plugin = {"PYTHONPATH": os.pathsep.join([str(ROOT), str(plugins)])}

    doomed = workers(name="doomed", pool="solo",
                     env={**NO_BEAT, **with_plugin, "RATCHET_CRASH_AT": "engine.after_execute:2"})
    send("ratchet.advance_run", run_id)
    assert doomed.wait_exit(timeout=90) == KILLED

    stale = workers(name="stale", pool="solo", env=NO_BEAT)  # started without the plug-in
    _wait(lambda: TraceEvent.objects.filter(run_id=run_id, event_type="run.blocked").exists(),
          timeout=120, what="run.blocked", workers=[doomed, stale])
    stale.stop()

    blocked = TraceEvent.objects.filter(run_id=run_id, event_type="run.blocked").first()
    assert blocked.payload["error"] == "PluginLoadError" and "restart" in blocked.payload["hint"]
    assert blocked.payload["worker"].startswith("stale@")
    assert not TraceEvent.objects.filter(run_id=run_id, event_type="recovery.failed").exists()
    assert Run.objects.get(run_id=run_id).phase in ("running", "pending")
    before = recovery_stats(run_ids=[run_id])
    assert before.failed == 0 and before.open == 1, before
    assert MetricCounter.objects.filter(name="runs_blocked").count() >= 1
    assert MetricCounter.objects.filter(name="recoveries_failed").count() == 0

    # The restarted worker's start-up sweep must find the run as idle (one second by the database
    # clock, RATCHET_SWEEP_SECONDS below) even though blocked runs are held back for an hour.
    _wait(lambda: run_id in [c.run_id for c in runs_needing_recovery(idle_seconds=1.0)],
          timeout=60, what="idle blocked run", workers=[stale])
    restarted = workers(name="restarted", pool="solo",
                        env={**NO_BEAT, **with_plugin, "RATCHET_SWEEP_SECONDS": "1"})

    assert wait_for_phase(run_id, ("completed", "failed", "needs_review", "cancelled"), timeout=120,
                          workers=[doomed, stale, restarted]) == "completed"
    after = recovery_stats(run_ids=[run_id])
    assert after.failed == 0 and after.succeeded == 1 and after.success_rate == 1.0, after
    kv = store(tmp_path)
    assert sorted(kv["data"]) == sorted(f"note-{n}" for n in range(1, NOTES + 1))
    applied = Counter(r["idempotency_key"] for r in kv["receipts"])
    assert len(applied) == NOTES and set(applied.values()) == {1}, applied
