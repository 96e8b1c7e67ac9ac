"""Story: replay the last 30 commits of this project's own repository through the engine.

The shipped ``replay_history.toml`` scenario end to end: ``manage.py run`` in a child process
clones the repository at the base of its last 30 first-parent commits and lands each one through
the git adapter as exactly one keyed commit; the run completes with the tree-equals-source
verifier passing. It needs at least 31 first-parent commits; with fewer (a young or shallow
clone) it is skipped, except under ``CI=true``, where a shallow checkout must not hide it.
``RATCHET_TEST_REPLAY_REPO`` points it at another repository.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runtime.models import Run
from runtime.taskspec import SHIPPED_TASKS_DIR
from tests.engine.support import head_tree, key_effects, keyed_commits, run_target, trace_events
from tests.helpers.procs import run_manage
from tests.planners.gitrepo import git, replay_repository

PROJECT_ROOT = Path(__file__).resolve().parents[2]
COMMITS = 30


def _repository() -> Path:
    return replay_repository(COMMITS)


def _task(directory: Path, repo: Path) -> Path:
    """The shipped replay task, with its source and target pointed at ``repo`` and ``directory``."""
    text = (SHIPPED_TASKS_DIR / "replay_history.toml").read_text(encoding="utf-8")
    text, sources = re.subn(r'(?m)^source = .*$', f"source = {json.dumps(str(repo))}", text)
    text, targets = re.subn(r'(?m)^target = .*$',
                            f"target = {json.dumps(str(directory / 'replay'))}", text)
    assert (sources, targets) == (1, 1) and f'range = "last:{COMMITS}"' in text
    path = directory / "replay_history.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.django_db(transaction=True)
def test_it_replays_the_last_30_commits_of_this_repository(tmp_path: Path) -> None:
    repo = _repository()

    done = run_manage("run", str(_task(tmp_path, repo)), "--no-progress", timeout=600)

    assert done.returncode == 0, done.stderr
    run_id = done.stdout.splitlines()[0].removeprefix("run ")
    run = Run.objects.get(run_id=run_id)
    assert (run.phase, run.stop_reason) == ("completed", "verified")
    (verdict,) = trace_events(run_id, "verifier.passed")
    assert verdict["passed"] is True
    target = run_target(run_id)
    assert head_tree(target) == git(repo, "rev-parse", "HEAD^{tree}").strip()
    effects = key_effects(target)
    assert len(keyed_commits(target)) == COMMITS == len(effects)
    assert set(effects.values()) == {1}
    assert trace_events(run_id, "audit.effects")[-1] == {"keys": COMMITS, "duplicates": 0,
                                                         "missing": []}
