"""Story: the tree-equals-source verifier refuses anything but an exact, clean replay.

A partial replay, an out-of-band edit, an untracked file or a target without commits all fail
with a reason an operator can read; only the exact tip tree on a clean work tree passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import VerifierError
from runtime.planners.factory import build_planner
from runtime.taskspec import TaskSpec, load_task_spec
from runtime.verifiers.builtin import verify
from tests.planners.gitrepo import FIXTURES, BlobStore, History, apply_commit, git, observation


def _replay(spec: TaskSpec, commits: int) -> tuple[Path, dict]:
    target = spec.resolve_target()
    planner = build_planner(spec)
    planner.prepare_environment(target)
    state = planner.init_state()
    blobs = BlobStore()
    for cursor in range(commits):
        action = planner.propose(cursor=cursor, planner_state=state, observation=observation(),
                                 put_blob=blobs.put)
        apply_commit(target, action, blobs)
    return target, state


def test_it_fails_a_partial_replay(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target, state = _replay(spec, 7)

    outcome = verify(spec, observation("v7"), target, planner_state=state)

    assert not outcome.passed
    assert "differs from source tip tree" in outcome.detail and "v7" in outcome.detail


def test_it_fails_a_matching_tree_with_an_edited_work_tree(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target, state = _replay(spec, 8)
    (target / "README.md").write_text("edited out of band\n")
    (target / "stray.txt").write_text("untracked\n")

    outcome = verify(spec, observation(), target, planner_state=state)

    assert not outcome.passed
    assert "not clean" in outcome.detail
    assert "README.md" in outcome.detail and "stray.txt" in outcome.detail


def test_it_fails_a_target_without_commits(replay_task: Path) -> None:
    spec = load_task_spec(replay_task)
    target = spec.resolve_target()
    target.mkdir()
    git(target, "init", "-q")

    outcome = verify(spec, observation(), target)

    assert not outcome.passed and "no readable HEAD" in outcome.detail


def test_it_raises_when_the_source_is_gone(replay_task: Path, history: History) -> None:
    spec = load_task_spec(replay_task)
    target, state = _replay(spec, 8)
    (replay_task.parent / "source").unlink()

    with pytest.raises(VerifierError):
        verify(spec, observation(), target, planner_state=state)


def _old_git_tree(repo: Path, entries: list[tuple[bytes, bytes, str]]) -> str:
    """A tree object written byte for byte, as git before 1.5 wrote them (``040000``, ``100664``)."""
    raw = b"".join(mode + b" " + name + b"\0" + bytes.fromhex(oid) for mode, name, oid in entries)
    return git(repo, "hash-object", "-t", "tree", "-w", "--literally", "--stdin", input=raw).strip()


def _history_ending_in_an_old_git_tree(repo: Path) -> tuple[str, str]:
    """A source whose tip tree uses modes current git never writes; returns (tip, its tree)."""
    author = {"GIT_AUTHOR_NAME": "Old Git", "GIT_AUTHOR_EMAIL": "old@example.org",
              "GIT_AUTHOR_DATE": "2008-01-01T00:00:00+00:00"}
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# old\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "Root", **author)
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"# old, edited\n").strip()
    tool = git(repo, "hash-object", "-w", "--stdin", input=b"echo tool\n").strip()
    inner = git(repo, "mktree", input=f"100644 blob {blob}\tnested.txt\n".encode()).strip()
    tree = _old_git_tree(repo, [(b"100644", b"README.md", blob), (b"040000", b"docs", inner),
                                (b"100664", b"tool.sh", tool)])
    tip = git(repo, "commit-tree", tree, "-p", "HEAD", "-m", "Written by an old git", **author).strip()
    git(repo, "update-ref", "HEAD", tip)
    return tip, tree


def test_it_passes_a_replayed_tree_whose_source_used_modes_git_no_longer_writes(
        tmp_path: Path) -> None:
    """A zero-padded ``040000`` subtree and a ``100664`` file: the replay writes the canonical
    tree (another id, the same files), which passes, with the reason in the detail; a tree
    that differs in content still fails (DESIGN.md section 5.5)."""
    _, old_tree = _history_ending_in_an_old_git_tree(tmp_path / "source")
    task = tmp_path / "task.toml"
    task.write_text((FIXTURES / "git_replay.toml").read_text().replace('"last:8"', '"last:1"'))
    spec = load_task_spec(task)
    target, state = _replay(spec, 1)

    outcome = verify(spec, observation("v1"), target, planner_state=state)

    assert git(target, "rev-parse", "HEAD^{tree}").strip() != old_tree
    assert git(target, "ls-tree", "-r", "HEAD") == git(tmp_path / "source", "ls-tree", "-r", old_tree)
    assert outcome.passed, outcome.detail
    assert "modes it no longer writes" in outcome.detail
    (target / "docs" / "nested.txt").write_text("changed\n")
    git(target, "commit", "-q", "-am", "Out of band", GIT_AUTHOR_NAME="Eve", GIT_AUTHOR_EMAIL="eve@example.org")

    assert not verify(spec, observation("v2"), target, planner_state=state).passed
