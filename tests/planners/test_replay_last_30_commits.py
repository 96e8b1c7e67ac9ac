"""Story: replay the last 30 commits of this project's own repository.

This is the shipped ``runtime/task_specs/replay_history.toml`` scenario on real history: the plan is
built, applied by hand to a fresh clone at the base, and the tree-equals-source verifier passes.
It needs at least 31 first-parent commits; with fewer (a young or shallow clone) it is skipped,
except under ``CI=true``, where a shallow checkout must not silently hide it.
``RATCHET_TEST_REPLAY_REPO`` points it at another repository.
"""

from __future__ import annotations

from pathlib import Path

from runtime.planners.base import Done
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.planners.git_history.replay_target import clone_at_base
from runtime.taskspec import SHIPPED_TASKS_DIR, TaskSpec, load_task_spec
from runtime.verifiers.builtin import verify
from tests.planners.gitrepo import BlobStore, apply_commit, observation, replay_repository

PROJECT_ROOT = Path(__file__).resolve().parents[2]
COMMITS = 30


def _repository() -> Path:
    return replay_repository(COMMITS)


def test_it_replays_the_last_30_commits_of_this_repository(tmp_path: Path) -> None:
    repo = _repository()
    data = load_task_spec(SHIPPED_TASKS_DIR / "replay_history.toml").model_dump(mode="json")
    data["planner"]["source"] = str(repo)
    data["environment"]["target"] = str(tmp_path / "target")
    spec = TaskSpec.from_json(data)

    planner = GitHistoryPlanner(source=repo, range=f"last:{COMMITS}")
    state = planner.init_state()
    assert state["count"] == COMMITS
    clone_at_base(source=repo, base=str(state["base"]), target=tmp_path / "target")
    blobs = BlobStore()
    for cursor in range(COMMITS):
        action = planner.propose(cursor=cursor, planner_state=state, observation=observation(),
                                 put_blob=blobs.put)
        assert action.kind == "commit"
        apply_commit(tmp_path / "target", action, blobs)
    assert isinstance(planner.propose(cursor=COMMITS, planner_state=state,
                                      observation=observation(), put_blob=blobs.put), Done)

    outcome = verify(spec, observation(), tmp_path / "target", planner_state=state)
    assert outcome.passed, outcome.detail
