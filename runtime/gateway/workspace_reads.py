"""What an agent may read of its run's files: one file, one directory, within the policy's paths
(DESIGN.md section 5.13).

A run's environment of a file adapter (``workspace``, ``git``) is a directory. An agent reads in
it only what the run's policy would let it write (``allowed_paths``): a file whose path matches
one of them, a directory listing that shows such files and the directories that may hold some.
The adapter's own records (``.ratchet/``) and git's metadata (``.git/``) are never shown, a
symbolic link that leaves the directory is refused, and a file is read up to
``RATCHET_GATEWAY_READ_MAX_BYTES``. Reading changes nothing: no adapter is opened, no lease is
taken, and every read needs a token for the run and counts against its rate limit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from django.conf import settings

from runtime.errors import GatewayInputError, GatewayPolicyRefusedError
from runtime.gateway.tokens import token_admit
from runtime.gateway.tools import run_spec
from runtime.models import GatewayToken
from runtime.taskspec import path_allowed, relative_path_problem

FILE_ADAPTERS = ("workspace", "git")
"""Adapter kinds whose environment is a directory of files the gateway can read."""

HIDDEN = (".ratchet", ".git")
"""Folders never shown: the workspace adapter's journal and git's metadata."""

MAX_ENTRIES = 1000
"""Most entries one listing returns (``truncated`` says when there were more)."""


def _environment(*, run_id: str, token: str | None, admitted: GatewayToken | None) -> tuple[Path, list[str]]:
    """The run's directory and its policy's ``allowed_paths``.

    Raises:
        GatewayTokenError / GatewayScopeError / GatewayRateLimitedError: as ``token_admit``.
        GatewayInputError: the run's environment is not a directory of files.
    """
    _, run = token_admit(token=token, run_id=run_id, admitted=admitted)
    spec = run_spec(stored=run.spec["task"])
    if spec.environment.adapter not in FILE_ADAPTERS:
        raise GatewayInputError(f"the run's environment ({spec.environment.adapter}) has no files to read",
                                run_id=run_id)
    target = Path(str(run.spec.get("target") or spec.environment.target))
    return target, list(spec.policy.allowed_paths)


def _literal_prefix(pattern: str) -> str:
    """The part of a glob before its first wildcard, cut back to a whole folder."""
    head = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    return head if head == pattern else head.rpartition("/")[0]


def _may_hold(folder: str, patterns: list[str]) -> bool:
    """Whether some allowed path may lie under ``folder`` (``""``: the top)."""
    if not folder:
        return True
    for pattern in patterns:
        prefix = _literal_prefix(pattern)
        if not prefix or (prefix + "/").startswith(folder + "/") or (folder + "/").startswith(prefix + "/"):
            return True
    return False


def _checked(target: Path, path: str) -> Path:
    """``target / path`` when it stays inside ``target`` after following links.

    Raises:
        GatewayInputError: an unsafe path, a hidden folder, or a link out of the directory.
    """
    problem = relative_path_problem(path)
    if problem is not None:
        raise GatewayInputError(f"the path is not readable: {problem}", path=path[:200])
    if any(segment in HIDDEN for segment in path.split("/")):
        raise GatewayInputError("the path is in a folder the gateway never shows", path=path[:200])
    root = target.resolve()
    full = (root / path).resolve()
    if full != root and root not in full.parents:
        raise GatewayInputError("the path leaves the run's directory (a symbolic link)", path=path[:200])
    return full


def workspace_read(*, run_id: str, path: str, token: str | None = None,
                   admitted: GatewayToken | None = None) -> dict[str, Any]:
    """``{"path", "exists", "content", "size_bytes", "truncated"}`` of one file of the run.

    ``content`` is UTF-8 text (undecodable bytes replaced) up to ``RATCHET_GATEWAY_READ_MAX_BYTES``;
    a missing file answers ``exists: false`` (a write may create it).

    Raises:
        GatewayTokenError / GatewayScopeError / GatewayRateLimitedError: refused before reading.
        GatewayPolicyRefusedError: the policy's ``allowed_paths`` do not hold ``path``.
        GatewayInputError: not a file environment, an unsafe path, a folder, a link out.
    """
    target, patterns = _environment(run_id=run_id, token=token, admitted=admitted)
    full = _checked(target, path)
    if not path_allowed(path, patterns):
        raise GatewayPolicyRefusedError("the run's policy does not cover this path", path=path[:200])
    if not full.exists():
        return {"path": path, "exists": False, "content": None, "size_bytes": 0, "truncated": False}
    if not full.is_file():
        raise GatewayInputError("the path is a folder: list it with list_directory", path=path[:200])
    limit = int(getattr(settings, "RATCHET_GATEWAY_READ_MAX_BYTES", 262_144))
    size = full.stat().st_size
    with full.open("rb") as handle:
        data = handle.read(limit)
    return {"path": path, "exists": True, "content": data.decode("utf-8", errors="replace"), "size_bytes": size,
            "truncated": size > limit}


def workspace_list(*, run_id: str, path: str = "", token: str | None = None,
                   admitted: GatewayToken | None = None) -> dict[str, Any]:
    """``{"path", "entries": [{"name", "path", "kind", "size_bytes"}], "truncated"}`` of one folder.

    ``path`` ``""`` is the run's directory. Only files the policy's ``allowed_paths`` hold and
    folders that may hold such files are listed, sorted by name.

    Raises:
        as :func:`workspace_read`; GatewayInputError also for a path that is not a folder.
    """
    target, patterns = _environment(run_id=run_id, token=token, admitted=admitted)
    folder = path.strip("/")
    full = _checked(target, folder) if folder else target.resolve()
    if folder and not _may_hold(folder, patterns):
        raise GatewayPolicyRefusedError("the run's policy covers nothing in this folder", path=path[:200])
    if not full.is_dir():
        raise GatewayInputError("the path is not a folder", path=path[:200])
    entries: list[dict[str, Any]] = []
    with os.scandir(full) as found:
        for entry in sorted(found, key=lambda e: e.name):
            rel = f"{folder}/{entry.name}" if folder else entry.name
            if entry.name in HIDDEN or relative_path_problem(rel) is not None:
                continue
            if entry.is_dir(follow_symlinks=False):
                if _may_hold(rel, patterns):
                    entries.append({"name": entry.name, "path": rel, "kind": "directory", "size_bytes": None})
            elif entry.is_file(follow_symlinks=False) and path_allowed(rel, patterns):
                entries.append({"name": entry.name, "path": rel, "kind": "file",
                                "size_bytes": entry.stat(follow_symlinks=False).st_size})
    return {"path": folder, "entries": entries[:MAX_ENTRIES], "truncated": len(entries) > MAX_ENTRIES}
