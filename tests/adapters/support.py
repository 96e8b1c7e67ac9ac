"""Helpers and fixtures for the adapter stories: a workspace, a git repository, blobs, children.

Repositories are built with the git CLI in ``tmp_path`` (a few commits, one tracked symlink).
Crash and concurrency tests run the adapter in real child processes (``child_execute.py``), armed
through ``RATCHET_CRASH_AT``; no threads stand in for processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime.adapters.base import Adapter
from runtime.adapters.factory import open_adapter
from runtime.adapters.git.adapter import GitAdapter
from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.core.checkpoint import Action, Receipt

REPO_ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "child_execute.py"
TOKEN = 7


class BlobStore:
    """Content-addressed blobs in a directory (children read them too); callable as a BlobSource."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def put(self, data: bytes) -> str:
        hexdigest = hashlib.sha256(data).hexdigest()
        (self.root / hexdigest).write_bytes(data)
        return "sha256:" + hexdigest

    def __call__(self, digest: str) -> bytes:
        return (self.root / digest.removeprefix("sha256:")).read_bytes()


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    """Run git in ``repo`` as a test user, isolated from this machine's git config."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
        "GIT_AUTHOR_NAME": "Dana Developer",
        "GIT_AUTHOR_EMAIL": "dana@example.com",
        "GIT_COMMITTER_NAME": "Dana Developer",
        "GIT_COMMITTER_EMAIL": "dana@example.com",
    }
    done = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env=env, check=True)
    return done.stdout.decode()


def make_repo(path: Path) -> Path:
    """A repository with three commits: a README, a small package and a tracked symlink."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# demo\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "Add README")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hello')\n")
    (path / "run.sh").write_text("#!/bin/sh\necho run\n")
    (path / "run.sh").chmod(0o755)
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "Add app")
    os.symlink("../outside", path / "escape")
    git(path, "add", "escape")
    git(path, "commit", "-q", "-m", "Add a symlink pointing out of the repository")
    return path


def make_workspace(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# demo\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hello')\n")
    return path


def commits_with_key(repo: Path, key: str) -> int:
    """How many commits reachable from HEAD carry ``Idempotency-Key: <key>`` as a trailer."""
    out = git(repo, "log", "--format=%(trailers:key=Idempotency-Key,valueonly)%x00", "HEAD")
    return sum(1 for chunk in out.split("\0") if chunk.strip() == key)


def journal_records(workspace: Path) -> list[dict[str, Any]]:
    lines = (workspace / ".ratchet" / "journal.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def effects_for_key(env: Env, key: str) -> int:
    """Count effects for ``key`` in the adapter's own records (commits or committed lines)."""
    if env.kind == "git":
        return commits_with_key(env.path, key)
    return sum(1 for r in journal_records(env.path) if r["type"] == "committed" and r["key"] == key)


@dataclass
class Env:
    """One environment under test: its kind, directory, adapter and blob store."""

    kind: str
    path: Path
    adapter: Adapter
    blobs: BlobStore

    def reopen(self) -> Adapter:
        """A fresh adapter on the same target, as another process would see it."""
        return open_adapter(self.kind, self.path)

    def write(self, path: str, content: bytes, *, executable: bool = False) -> Action:
        return Action(kind="write_file", target=path,
                      params={"content": self.blobs.put(content), "executable": executable})

    def delete(self, path: str) -> Action:
        return Action(kind="delete_file", target=path)

    def execute(self, action: Action, key: str, *, token: int = TOKEN,
                adapter: Adapter | None = None, **kwargs: Any) -> Receipt:
        return (adapter or self.adapter).execute(
            action, idempotency_key=key, intent_digest=action.intent_digest(), fencing_token=token,
            blobs=self.blobs, **kwargs)


@pytest.fixture
def blobs(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / "blobs")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def git_env(repo: Path, blobs: BlobStore) -> Env:
    return Env("git", repo, GitAdapter(repo), blobs)


@pytest.fixture
def workspace_env(tmp_path: Path, blobs: BlobStore) -> Env:
    path = make_workspace(tmp_path / "workspace")
    return Env("workspace", path, WorkspaceAdapter(path), blobs)


@pytest.fixture(params=["workspace", "git"])
def env(request: pytest.FixtureRequest) -> Env:
    """Each story runs against both adapters."""
    return request.getfixturevalue(f"{request.param}_env")


def _child(env: Env, action: Action, key: str, *, token: int, crash_at: str | None,
           start_file: Path | None) -> tuple[list[str], dict[str, str]]:
    spec = {
        "kind": env.kind, "target": str(env.path), "blob_dir": str(env.blobs.root),
        "action": action.model_dump(mode="json"), "key": key,
        "intent_digest": action.intent_digest(), "token": token,
        "start_file": str(start_file) if start_file else None,
    }
    child_env = {k: v for k, v in os.environ.items() if k != "RATCHET_CRASH_AT"}
    child_env["PYTHONPATH"] = str(REPO_ROOT)
    if crash_at:
        child_env["RATCHET_CRASH_AT"] = crash_at
    return [sys.executable, str(CHILD), json.dumps(spec)], child_env


def run_child(env: Env, action: Action, key: str, *, token: int = TOKEN,
              crash_at: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Execute ``action`` in a fresh Python process; ``crash_at`` arms a crash point there."""
    cmd, child_env = _child(env, action, key, token=token, crash_at=crash_at, start_file=None)
    return subprocess.run(cmd, capture_output=True, text=True, env=child_env, cwd=REPO_ROOT,
                          timeout=timeout)


def start_child(env: Env, action: Action, key: str, *, start_file: Path, token: int = TOKEN
                ) -> subprocess.Popen[str]:
    """Start a child that waits for ``start_file`` and then executes (concurrency stories)."""
    cmd, child_env = _child(env, action, key, token=token, crash_at=None, start_file=start_file)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env, cwd=REPO_ROOT)


def commit_action(env: Env, **overrides: Any) -> Action:
    """A git ``commit`` action: two writes (one executable) and a delete, with a planned message
    and author; ``overrides`` replace whole parameters."""
    params = {
        "message": "Rework the app\n\nLonger explanation.\n\nSigned-off-by: Ada <ada@example.com>",
        "author_name": "Ada Author",
        "author_email": "ada@example.com",
        "author_date": "2026-01-02T03:04:05+01:00",
        "changes": [
            {"op": "write", "path": "src/app.py", "content": env.blobs.put(b"print('v2')\n"),
             "executable": False},
            {"op": "write", "path": "bin/tool", "content": env.blobs.put(b"#!/bin/sh\n"),
             "executable": True},
            {"op": "delete", "path": "run.sh"},
        ],
    }
    params.update(overrides)
    return Action(kind="commit", params=params)
