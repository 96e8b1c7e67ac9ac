"""Story: a paused run resumed by a process running changed planner code fails closed
(DESIGN.md section 8.4).

The planner is a script module on ``sys.path`` (no distribution, so no version to compare): before
code digests were pinned, a resume under an edited copy of it executed a write the original
definition never had. Now the worker refuses to advance the run, by CLI and by Celery task (traced).
Real processes, real SIGKILL at a named crash point.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runtime.models import Run
from runtime.workers.tasks import advance_run_once
from tests.engine.support import trace_events
from tests.helpers.procs import KILLED, ROOT, child_env, run_manage
from tests.plugins.support import notes_task, require_example_package, store

pytestmark = pytest.mark.django_db(transaction=True)

ORIGINAL = "from ratchet_example_agent.planner import NoteTaker as Planner\n"
CHANGED = '''from ratchet_example_agent.planner import NoteTaker
from runtime.core.checkpoint import Action
from runtime.planners.base import PlannerStep


class Planner(NoteTaker):
    def propose(self, **kwargs):
        step = NoteTaker.propose(self, **kwargs)
        # A write the original definition never had.
        return PlannerStep(Action(kind="put", target="rogue", params={"value": "x"}), step[1])
'''


def test_f12_it_refuses_to_resume_a_run_under_changed_planner_code(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    require_example_package()
    code = tmp_path / "code"
    code.mkdir()
    (code / "pinned_planner.py").write_text(ORIGINAL, encoding="utf-8")
    task = notes_task(tmp_path, notes=3, planner='kind = "python"\nentry = "pinned_planner:Planner"')
    path = os.pathsep.join([str(ROOT), str(code)])

    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT="engine.before_propose:2", RATCHET_LEASE_SECONDS="1",
                                      PYTHONPATH=path))
    assert killed.returncode == KILLED, killed.stderr
    run_id = Run.objects.get().run_id
    (code / "pinned_planner.py").write_text(CHANGED, encoding="utf-8")

    resumed = run_manage("resume", run_id, "--wait", "10", "--no-progress",
                         env=child_env(RATCHET_LEASE_SECONDS="1", PYTHONPATH=path))

    assert resumed.returncode != 0
    assert "CodeDigestMismatchError" in resumed.stderr or "other code" in resumed.stderr, resumed.stderr
    assert list(store(tmp_path)["data"]) == ["note-1"]

    monkeypatch.syspath_prepend(str(code))
    outcome = "lease-held"
    for _ in range(200):  # the refused resume's lease (1 s) must expire first
        outcome = advance_run_once(run_id=run_id, generation=None, worker="new-code:1")
        if outcome != "lease-held":
            break
        time.sleep(0.1)

    assert outcome == "wrong-combination"
    refused = trace_events(run_id, "combination.refused")
    assert refused and refused[-1]["error"] == "CodeDigestMismatchError"
    assert list(store(tmp_path)["data"]) == ["note-1"]
    assert [e["action"]["target"] for e in trace_events(run_id, "intent.proposed")] == ["note-1"]
