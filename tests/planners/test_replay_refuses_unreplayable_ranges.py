"""Story: a replay range the adapter could not reproduce exactly fails when the run is created.

Submodules, symlinks, identity lines git reads ambiguously and extra headers are replayed; what
a Ratchet action cannot carry -- a path that is not UTF-8, a message or header whose receipt git
could not read back -- is refused (not silently skipped) with an error naming the commit; so are
ranges whose base is off the first-parent line, ranges longer than the history, empty ranges,
missing sources and planner states that were not made by this planner.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import (
    GitReplayError,
    GitReplayUnsupportedError,
    PlannerError,
    PlannerStateError,
)
from runtime.planners.git_history.planner import GitHistoryPlanner
from tests.planners.gitrepo import BlobStore, History, git, observation


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "root", GIT_AUTHOR_NAME="A", GIT_AUTHOR_EMAIL="a@example.org")
    return repo


def _raw_commit(repo: Path, tree: str, message: bytes, *, extra_header: bytes = b"",
                author: bytes = b"A <a@example.org> 1 +0000") -> str:
    head = git(repo, "rev-parse", "HEAD").strip()
    body = (f"tree {tree}\nparent {head}\n".encode() + b"author " + author + b"\n"
            b"committer A <a@example.org> 1 +0000\n" + extra_header + b"\n" + message)
    sha = git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin",
              input=body).strip()
    git(repo, "update-ref", "HEAD", sha)
    return sha


def test_it_refuses_a_path_that_is_not_utf8(tmp_path: Path) -> None:
    """Submodules and symlinks are replayed; a path an action cannot carry as text is
    refused when the run is created, naming the commit."""
    repo = _repo(tmp_path)
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"x\n").strip()
    tree = git(repo, "mktree", "-z", input=b"100644 blob " + blob.encode() + b"\tcaf\xe9\0").strip()
    sha = _raw_commit(repo, tree, b"latin-1 name\n")

    with pytest.raises(GitReplayUnsupportedError, match="is not UTF-8") as caught:
        GitHistoryPlanner(source=repo, range="last:1").init_state()
    assert caught.value.context["commit"] == sha


@pytest.mark.parametrize(("message", "header", "why"), [
    (b"NUL \0 inside\n", b"", "NUL"),
    ("EBCDIC\n".encode("cp037"), b"encoding cp037\n", "not ASCII-compatible"),
    (b"# ------------------------ >8 ------------------------\nall ignored\n", b"", "scissors"),
    (b"fine\n", b"x-extra a\0b\n", "NUL"),
])
def test_it_refuses_a_message_whose_trailers_could_not_be_read_back(
        tmp_path: Path, message: bytes, header: bytes, why: str) -> None:
    repo = _repo(tmp_path)
    sha = _raw_commit(repo, git(repo, "rev-parse", "HEAD^{tree}").strip(), message,
                      extra_header=header)

    with pytest.raises(GitReplayUnsupportedError, match=why) as caught:
        GitHistoryPlanner(source=repo, range="last:1").init_state()
    assert sha in str(caught.value)


@pytest.mark.parametrize("author", [
    b"Name<email> <none@none> 1 +0000",       # git splits it at the first "<"
    b"<> 1 +0000",
    b"A <a@example.org> 1 +0000 trailing",    # not a date git can read
    b"A <a@example.org>",                      # no date at all
])
def test_an_identity_line_git_reads_oddly_is_carried_verbatim(tmp_path: Path, author: bytes) -> None:
    repo = _repo(tmp_path)
    _raw_commit(repo, git(repo, "rev-parse", "HEAD^{tree}").strip(), b"odd author\n", author=author,
                extra_header=b"gpgsig -----BEGIN PGP SIGNATURE-----\n \n -----END PGP SIGNATURE-----\n")
    planner = GitHistoryPlanner(source=repo, range="last:1")

    action = planner.propose(cursor=0, planner_state=planner.init_state(), observation=observation(),
                             put_blob=BlobStore().put)

    assert action.params["header"].encode().startswith(b"author " + author + b"\ncommitter ")
    assert "author_name" not in action.params


def test_it_refuses_a_base_off_the_first_parent_line(history: History) -> None:
    # The feature branch was merged in; its tip is not on main's first-parent line.
    with pytest.raises(GitReplayError, match="not on the first-parent line"):
        GitHistoryPlanner(source=history.path, range=f"{history.feature_tip}..main").init_state()


def test_it_needs_one_more_commit_than_it_replays(history: History) -> None:
    assert GitHistoryPlanner(source=history.path, range="last:8").init_state()["count"] == 8
    with pytest.raises(GitReplayError, match="needs 10 first-parent commits"):
        GitHistoryPlanner(source=history.path, range="last:9").init_state()


def test_it_refuses_an_empty_range(history: History) -> None:
    with pytest.raises(GitReplayError, match="holds no commits"):
        GitHistoryPlanner(source=history.path, range="main..main").init_state()


def test_it_refuses_an_unknown_revision(history: History) -> None:
    with pytest.raises(GitReplayError, match="is not a commit"):
        GitHistoryPlanner(source=history.path, range="nope..main").init_state()


def test_it_refuses_a_missing_source(tmp_path: Path) -> None:
    with pytest.raises(GitReplayError, match="does not exist"):
        GitHistoryPlanner(source=tmp_path / "gone", range="last:1").init_state()


@pytest.mark.parametrize("state", [
    {"kind": "scripted", "steps": 1},
    {"kind": "git-history", "source": "x", "base": "not-a-sha", "tip": "1" * 40,
     "count": 1, "commits_digest": "sha256:" + "0" * 64},
    {"kind": "git-history", "source": "x", "base": "0" * 40, "tip": "1" * 40,
     "count": 0, "commits_digest": "sha256:" + "0" * 64},
    {"kind": "git-history", "source": "x", "base": "0" * 40, "tip": "1" * 40,
     "commits": ["2" * 40]},
])
def test_it_refuses_a_planner_state_it_did_not_make(history: History, state: dict) -> None:
    planner = GitHistoryPlanner(source=history.path, range="last:1")

    with pytest.raises(PlannerStateError):
        planner.propose(cursor=0, planner_state=state, observation=observation(),
                        put_blob=BlobStore().put)


def test_it_refuses_a_negative_cursor(history: History) -> None:
    planner = GitHistoryPlanner(source=history.path, range="last:1")

    with pytest.raises(PlannerError):
        planner.propose(cursor=-1, planner_state=planner.init_state(),
                        observation=observation(), put_blob=BlobStore().put)
