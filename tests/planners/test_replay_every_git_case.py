"""Story: an operator replays a history holding everything git can hold (DESIGN.md section 5.5).

The source is built by ``tests/helpers/git_cases.py``: empty commits, merges that change nothing
on the first-parent line, an octopus merge, CRLF / blank / non-UTF-8 messages with an
``encoding`` header, symlinks, gitlinks, mode changes, renames, binary and large files, unusual
path names, distinct authors and committers with odd offsets. Every commit after the root is
replayed through the real planner and the real git adapter. Each replayed commit must have the
source commit's tree, the same header lines after the tree and parents byte for byte (author,
committer, encoding, mergetag, gpgsig), the source message's bytes around the receipt lines and
git's trailer parse the source's trailers followed by Ratchet's (DESIGN.md section 5.16) -- one
commit per source commit, one commit per key. The last story drives the same replay through the engine.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runtime.adapters.git.adapter import GitAdapter
from runtime.core.checkpoint import Action
from runtime.planners.git_history.planner import GitHistoryPlanner
from runtime.planners.git_history.replay_state import read_replay_state, replay_commits
from runtime.planners.git_history.replay_target import clone_at_base
from tests.engine.support import run_target, write_replay_task
from tests.helpers.git_cases import build_case_repo, first_parent_count
from tests.helpers.replay_fidelity import check_replay, check_replayed
from tests.planners.gitrepo import BlobStore, observation


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True,
                          env={"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull,
                               "GIT_CONFIG_NOSYSTEM": "1"}).stdout


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_case_repo(tmp_path_factory.mktemp("cases") / "source")


def _replay_last(cases: Path, target: Path, count: int) -> tuple[dict, GitAdapter]:
    """Replay ``last:count`` of ``cases`` into ``target`` commit by commit, checking each one."""
    planner = GitHistoryPlanner(source=cases, range=f"last:{count}")
    state = planner.init_state()
    clone_at_base(source=cases, base=str(state["base"]), target=target)
    adapter, blobs = GitAdapter(target), BlobStore()

    for cursor, source_commit in enumerate(replay_commits(read_replay_state(state))):
        action = planner.propose(cursor=cursor, planner_state=state, observation=observation(),
                                 put_blob=blobs.put)
        assert isinstance(action, Action)
        receipt = adapter.execute(action, idempotency_key=f"key-{cursor}",
                                  intent_digest=action.intent_digest(), fencing_token=1,
                                  blobs=blobs.blobs.__getitem__)
        replayed = receipt.receipt_id
        assert _git(target, "rev-parse", f"{replayed}^{{tree}}") == \
            _git(cases, "rev-parse", f"{source_commit}^{{tree}}"), f"commit {cursor}"
        assert check_replayed(cases, source_commit, target, replayed) == [], f"commit {cursor}"
        assert _git(target, "status", "--porcelain") == b""

    replayed_commits = _git(target, "rev-list", f"{state['base']}..HEAD").split()
    assert len(replayed_commits) == count
    assert sorted(r.idempotency_key for r in adapter.receipts()) == \
        sorted(f"key-{n}" for n in range(count))
    return state, adapter


def test_every_case_replays_to_the_same_trees_messages_and_identities(
        cases: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    _replay_last(cases, target, first_parent_count(cases) - 1)

    assert _git(target, "ls-tree", "HEAD", "link").startswith(b"120000")


def test_the_last_commits_replay_above_a_base_whose_history_carries_a_foreign_key(
        cases: Path, tmp_path: Path) -> None:
    """``last:N`` whose base is the source commit ending in ``Idempotency-Key:
    someone-elses-key``: that trailer is the source's, below the run's base, so it is neither a
    receipt nor a duplicate, and the run does not freeze on it (DESIGN.md section 5.5)."""
    line = _git(cases, "log", "--first-parent", "--format=%H %(trailers:key=Idempotency-Key,valueonly)",
                "HEAD").decode().splitlines()
    forged = next(n for n, entry in enumerate(line) if entry.split(" ", 1)[1].strip())
    target = tmp_path / "target"

    state, adapter = _replay_last(cases, target, forged)

    assert _git(cases, "rev-parse", str(state["base"])) == _git(cases, "rev-parse", f"HEAD~{forged}")
    assert b"someone-elses-key" in _git(target, "log", "-1", "--format=%B", str(state["base"]))
    assert adapter.lookup_receipt("someone-elses-key") is None
    assert _git(target, "rev-parse", "HEAD^{tree}") == _git(cases, "rev-parse", "HEAD^{tree}")


@pytest.mark.django_db(transaction=True)
def test_the_engine_replays_every_case_to_completion(
        cases: Path, tmp_path: Path, ratchet_keys: dict) -> None:
    from runtime.engine import run_advance, run_start

    count = first_parent_count(cases) - 1
    task = write_replay_task(tmp_path / "replay", cases, count=count, budget=count + 5)

    run_id = run_start(spec_path=task)
    report = run_advance(run_id=run_id)

    assert report.phase == "completed", report
    target = run_target(run_id)
    assert _git(target, "rev-parse", "HEAD^{tree}") == _git(cases, "rev-parse", "HEAD^{tree}")
    assert len(_git(target, "log", "--format=%H", "--first-parent", "HEAD").split()) == count + 1
    base = _git(cases, "rev-parse", f"HEAD~{count}").decode().strip()
    assert check_replay(cases, base, _git(cases, "rev-parse", "HEAD").decode().strip(), target) == {}
