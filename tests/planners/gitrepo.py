"""Helpers for the planner stories: build real git histories and apply commit actions by hand.

Histories are built and actions applied with the product's
:mod:`runtime.planners.git_history.history_builder` (plain file writes and ``git commit``), which
keeps these stories independent of the git adapter, which has its own tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runtime.adapters.base import Observation
from runtime.core.canonical import DigestKind, digest, digest_bytes
from runtime.core.checkpoint import Action
from runtime.errors import ConfigurationError
from runtime.planners.git_history.history_builder import (
    commit_action_apply,
    history_commit,
    history_git,
    history_head,
    history_init,
    history_write,
)

git = history_git
"""Run git in a repository with a neutral config and the fixed committer; stdout as text."""


class BlobStore:
    """The attachment store stand-in: content-addressed bytes."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.calls = 0

    def put(self, data: bytes) -> str:
        self.calls += 1
        key = digest_bytes(data)
        self.blobs[key] = bytes(data)
        return key


def observation(version: str = "v0") -> Observation:
    """A stand-in observation; the planners under test do not consult it."""
    return Observation(
        instance_id="env-test",
        version=version,
        state_fingerprint=digest(DigestKind.ENVIRONMENT, {"v": version}),
        kind="git",
    )


@dataclass
class History:
    """A source repository built by :func:`build_history` and what the stories check against."""

    path: Path
    root: str
    first_parent: list[str] = field(default_factory=list)
    """Commits after the root on main's first-parent line, oldest first."""
    feature_tip: str = ""

    @property
    def tip(self) -> str:
        return self.first_parent[-1]


def _commit(repo: Path, message: str, *, date: str, name: str = "Ada Lovelace",
            email: str = "ada@example.org") -> str:
    history_commit(repo, message, date=date, author=(name, email))
    return history_head(repo)


BINARY = bytes(range(256)) * 4 + b"\x00\xff\x00"
UNICODE_NAME = "docs/naïve notes ü.md"


def build_history(repo: Path) -> History:
    """A root commit plus eight first-parent commits on ``main``.

    Covers adds, edits, deletes, an executable file, a mode-only change, a binary file, names
    with spaces and non-ASCII characters, a file replaced by a directory, a merge of a side
    branch, multi-line messages, a non-ASCII author and several UTC offsets.
    """
    history_init(repo)
    history_write(repo, "README.md", "hello\n")
    history_write(repo, "src/app.py", "print('v1')\n")
    history_write(repo, "docs/guide.md", "# Guide\n")
    history_write(repo, "remove_me.txt", "short-lived\n")
    history_write(repo, "notes", "notes as a file\n")
    history = History(path=repo, root=_commit(repo, "Initial import\n",
                                              date="2024-01-01T09:00:00+00:00"))
    fp = history.first_parent

    history_write(repo, "scripts/run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    fp.append(_commit(repo, "Add run script\n", date="2024-01-02T09:00:00+05:30"))

    history_write(repo, "src/app.py", "print('v2')\n")
    history_write(repo, "assets/logo.bin", BINARY)
    fp.append(_commit(repo, "Edit app, add logo\n\nThe logo is binary.\n",
                      date="2024-01-03T09:00:00-07:00"))

    (repo / "remove_me.txt").unlink()
    history_write(repo, UNICODE_NAME, "naïve ünïcode\n")
    history_write(repo, "日本語 file.txt", "こんにちは\n")
    fp.append(_commit(repo, "Remove temp file; add notes with odd names\n",
                      date="2024-01-04T09:00:00+01:00"))

    (repo / "src/app.py").chmod(0o755)
    history_write(repo, "README.md", "hello\nworld\n")
    fp.append(_commit(repo, "Make app executable\n", date="2024-01-05T09:00:00+00:00"))

    git(repo, "checkout", "-q", "-b", "feature")
    history_write(repo, "feature/feature.py", "FEATURE = True\n")
    _commit(repo, "Feature module\n", date="2024-01-06T09:00:00+00:00", name="Grace Hopper",
            email="grace@example.org")
    history_write(repo, "docs/guide.md", "# Guide\n\nFeature docs.\n")
    history.feature_tip = _commit(repo, "Document the feature\n",
                                  date="2024-01-06T10:00:00+00:00", name="Grace Hopper",
                                  email="grace@example.org")
    git(repo, "checkout", "-q", "main")
    history_write(repo, "README.md", "hello\nworld\nagain\n")
    fp.append(_commit(repo, "Edit README on main\n", date="2024-01-07T09:00:00+00:00"))

    git(repo, "merge", "-q", "--no-ff", "--no-edit", "feature",
        GIT_AUTHOR_NAME="Ada Lovelace", GIT_AUTHOR_EMAIL="ada@example.org",
        GIT_AUTHOR_DATE="2024-01-08T09:00:00+00:00")
    fp.append(git(repo, "rev-parse", "HEAD").strip())

    (repo / "notes").unlink()
    history_write(repo, "notes/today.md", "notes are a directory now\n")
    history_write(repo, "assets/logo.bin", BINARY[::-1])
    fp.append(_commit(repo, "Turn notes into a directory\n", date="2024-01-09T09:00:00+02:00"))

    (repo / "docs/guide.md").unlink()
    fp.append(_commit(repo, "Drop the guide\n\nIt moved to the wiki.\n\n  Indented line kept.\n",
                      date="2024-01-10T09:00:00-03:30", name="Zoë Ångström",
                      email="zoe@example.org"))
    return history


def apply_commit(clone: Path, action: Action, blobs: BlobStore) -> str:
    """Apply a planner's commit action to ``clone`` by hand; return the new HEAD."""
    assert action.kind == "commit"
    commit_action_apply(repo=clone, params=action.params, blob=blobs.blobs.__getitem__)
    return history_head(clone)


def commit_facts(repo: Path, rev: str) -> dict[str, str]:
    """What a replay must carry over from a commit: tree-independent metadata."""
    sep = "\x1f"
    out = git(repo, "log", "-1", f"--format=%an{sep}%ae{sep}%aI{sep}%B", rev)
    name, email, date, body = out.split(sep, 3)
    return {"author_name": name, "author_email": email, "author_date": date, "message": body}


def write_task(directory: Path, text: str, name: str = "task.toml") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tasks"
SHIPPED = Path(__file__).resolve().parents[2] / "runtime" / "task_specs"


REPLAY_COMMITS = 30


def replay_repository(commits: int = REPLAY_COMMITS) -> Path:
    """The repository whose real history the 30-commit stories replay: this project's own, or
    ``RATCHET_TEST_REPLAY_REPO``. With fewer than ``commits + 1`` first-parent commits (a young or
    shallow clone) the story is skipped, except under ``CI=true``, where it fails instead."""
    import os

    import pytest

    repo = Path(os.environ.get("RATCHET_TEST_REPLAY_REPO") or Path(__file__).resolve().parents[2])
    try:
        count = int(git(repo, "rev-list", "--first-parent", "--count", "HEAD"))
    except ConfigurationError:
        count = 0
    if count < commits + 1:
        reason = (f"{repo.name} has {count} first-parent commits; replaying the last {commits} "
                  f"needs {commits + 1} (in CI, check out full history: fetch-depth 0)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return repo
