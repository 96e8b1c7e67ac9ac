"""Blob bytes that say where they already live, so the store can record the place instead of a
copy (DESIGN.md section 4.12). Imports nothing from Django.

A planner that reads content out of a git repository (the git-history planner) hands
:class:`GitObjectBytes` to ``put_blob``: the same bytes, plus the repository and the object id.
The attachment store then records ``git:<oid>:<repository>`` instead of writing the bytes, and
reads them back with ``git cat-file`` (re-hashed against the ``sha256:`` digest like any
attachment), so a replayed file is stored by git's own objects and nowhere else.
"""

from __future__ import annotations

import re

GIT_PREFIX = "git:"
_OID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


class GitObjectBytes(bytes):
    """``bytes`` held by the git repository ``repository`` as the blob object ``oid``.

    Raises (on construction):
        ValueError: ``oid`` is not a 40- or 64-hex object id, or ``repository`` is not an
            absolute path.
    """

    repository: str
    oid: str

    def __new__(cls, data: bytes, *, repository: str, oid: str) -> GitObjectBytes:
        if not _OID.match(oid):
            raise ValueError(f"not a git object id: {oid!r:.80}")
        if not repository.startswith("/"):
            raise ValueError("the repository must be an absolute path")
        made = super().__new__(cls, data)
        made.repository, made.oid = repository, oid
        return made


def git_location(data: bytes) -> str | None:
    """``git:<oid>:<repository>`` for :class:`GitObjectBytes`, else None."""
    if isinstance(data, GitObjectBytes):
        return f"{GIT_PREFIX}{data.oid}:{data.repository}"
    return None


def git_location_parse(name: str) -> tuple[str, str] | None:
    """``(repository, oid)`` of a location :func:`git_location` made, or None for any other name."""
    if not name.startswith(GIT_PREFIX):
        return None
    oid, _, repository = name[len(GIT_PREFIX):].partition(":")
    if not _OID.match(oid) or not repository.startswith("/"):
        return None
    return repository, oid
