"""Story: several workers resume the same crashed run at once; each write still lands once.

DESIGN.md sections 4 and 8 (concurrent recovery). A worker is SIGKILLed right after its commit
landed in the repository (``git.after_ref_update``), its receipt unrecorded. Three new processes
then run ``manage.py resume`` at the same moment. The lease lets exactly one of them recover
and drive the run; the others wait for it and find the run finished. Afterwards every key is on
exactly one commit, the tree equals the source tip, and exactly one recovery is counted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.models import Run
from tests.engine.support import SOURCE_COMMITS, head_tree, key_effects, run_target, trace_events
from tests.helpers.procs import KILLED, MANAGE, ROOT, child_env, finish, run_manage
from tests.planners.gitrepo import git

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_lets_one_of_three_concurrent_resumes_recover_and_keeps_effects_unique(
    replay_task: Path, source: Path
) -> None:
    killed = run_manage("run", str(replay_task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT="git.after_ref_update:2",
                                      RATCHET_LEASE_SECONDS="1"))
    assert killed.returncode == KILLED, killed.stderr
    run_id = killed.stdout.splitlines()[0].removeprefix("run ")

    resumes = [
        subprocess.Popen([sys.executable, str(MANAGE), "resume", run_id, "--wait", "30",
                          "--no-progress", "--worker", f"resumer-{n}"],
                         env=child_env(), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for n in range(3)
    ]
    results = [finish(proc, timeout=90) for proc in resumes]

    for result in results:
        assert result.returncode == 0, result.stderr
        assert "verdict: completed" in result.stdout
    assert Run.objects.get(run_id=run_id).phase == "completed"
    target = run_target(run_id)
    assert head_tree(target) == git(source, "rev-parse", "HEAD^{tree}").strip()
    effects = key_effects(target)
    assert len(effects) == SOURCE_COMMITS and set(effects.values()) == {1}
    assert len(trace_events(run_id, "recovery.succeeded")) == 1
    assert len(trace_events(run_id, "write.reconciled")) == 1
    stats = json.loads(run_manage("recovery_stats", "--json", "--run", run_id).stdout)
    assert (stats["recoveries"], stats["success_rate"]) == (1, 1.0)
    assert stats["duplicate_submissions"] == 0
