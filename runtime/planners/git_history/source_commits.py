"""A source commit as the parameters of one ``commit`` action, and the up-front range scan.

For each replayed commit the planner carries over, byte for byte: the message and every header
line after the tree and parents -- as the author and committer fields (name, email, date with
its exact offset) and ``encoding`` when those say the header exactly, else as the raw ``header``
(an identity line git's own parser would split differently, such as ``Name<email> <none@none>``,
``gpgsig``, ``mergetag`` or any other extra header, an unusual order); and it lists
the changes against the commit's first parent (``git diff-tree -r --no-renames``): regular and
executable files, symlinks, gitlinks (the submodule's commit id; the submodule is never
fetched), mode changes, and deletes -- a rename is a delete plus a write. The shapes are the git
adapter's (:mod:`runtime.adapters.git.commit_params`), and the scan at run creation runs that
module's own checks over every commit of the range, so a commit the adapter would refuse is
refused then, naming the commit and the reason (:class:`GitReplayUnsupportedError`), never
halfway through a run.

Modes old git wrote and current git no longer writes (a ``100664`` file, a zero-padded
``040000`` subtree) are read by git as ``100644`` and ``40000`` and replayed that way: the
replayed tree has another id and the same files, which is what ``tree-equals-source`` compares
(DESIGN.md section 5.5). Still refused, because a Ratchet action cannot carry it or git would
not check it out, or the receipt could not be read back: a path that is not UTF-8 (actions
carry paths as text), a path git refuses (``.git`` in any spelling), a mode git's own reader
does not know, a symlink named ``.gitmodules`` and the like, a NUL byte in the message or the
header (``git log`` stops reading the commit there), a message opening with a scissors line (git
reads no trailers after it), an ASCII-incompatible ``encoding``, and commits with more than
``MAX_CHANGES`` changes. Imports nothing from Django.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pydantic import JsonValue

from runtime.adapters.git.commit_params import (
    EXECUTABLE,
    GITLINK,
    MAX_CHANGES,
    REGULAR,
    SYMLINK,
    Identity,
    bytes_param,
    check_encoding,
    check_header,
    check_ident,
    check_message,
    git_date,
    parse_git_change,
)
from runtime.errors import GitReplayError, GitReplayUnsupportedError, InvalidActionError
from runtime.planners.git_history.source import run_git

_IDENT_RE = re.compile(rb"^(.*) <(.*)> (\d{1,12} [+-]\d{4})$")
_PLACEHOLDER = "sha256:" + "0" * 64


@dataclass(frozen=True)
class SourceCommit:
    """What a replayed commit carries over, exactly as the source holds it."""

    message: bytes
    author: Identity | None
    committer: Identity | None
    encoding: str | None
    header: bytes | None = None
    """The header lines after tree and parents, when the fields above do not say them exactly
    (then the fields are None)."""


@dataclass(frozen=True)
class Entry:
    """One changed path of a first-parent diff."""

    status: str
    new_mode: str
    new_oid: str
    path: str


def _unsupported(commit: str, why: str) -> GitReplayUnsupportedError:
    return GitReplayUnsupportedError(f"commit {commit} cannot be replayed: {why}", commit=commit)


def _ident(value: bytes | None, *, role: str) -> Identity | None:
    match = _IDENT_RE.match(value or b"")
    if match is None:
        return None
    try:
        ident = check_ident(match.group(1), match.group(2), match.group(3).decode("ascii"),
                            role=role)
    except InvalidActionError:
        return None
    return ident if ident.line() == value else None


def _fields_form(header: bytes) -> SourceCommit | None:
    """Author, committer and encoding fields that write ``header`` back byte for byte, or None."""
    lines = header.split(b"\n")
    if len(lines) not in (2, 3) or not lines[0].startswith(b"author ") \
            or not lines[1].startswith(b"committer "):
        return None
    encoding = None
    if len(lines) == 3:
        if not lines[2].startswith(b"encoding "):
            return None
        try:
            encoding = check_encoding(lines[2][9:].decode("ascii"))
        except (InvalidActionError, UnicodeDecodeError):
            return None
    author, committer = _ident(lines[0][7:], role="author"), _ident(lines[1][10:], role="committer")
    if author is None or committer is None:
        return None
    return SourceCommit(message=b"", author=author, committer=committer, encoding=encoding)


def parse_commit(raw: bytes, *, commit: str) -> SourceCommit:
    """Parse a raw commit object (``git cat-file commit``) into a :class:`SourceCommit`.

    Raises:
        GitReplayUnsupportedError: a message or header the adapter could not reproduce exactly,
            or whose receipt git could not read back.
    """
    at = raw.find(b"\n\n")
    header, message = (raw, b"") if at < 0 else (raw[:at + 1], raw[at + 2:])
    lines = header.split(b"\n")
    rest = 1 if lines and lines[0].startswith(b"tree ") else 0
    while rest < len(lines) and lines[rest].startswith(b"parent "):
        rest += 1
    tail = b"\n".join(lines[rest:])
    try:
        check_message(message)
        fields = _fields_form(tail[:-1]) if tail.endswith(b"\n") else None
        if fields is not None:
            return SourceCommit(message=message, author=fields.author,
                                committer=fields.committer, encoding=fields.encoding)
        return SourceCommit(message=message, author=None, committer=None, encoding=None,
                            header=check_header(tail))
    except InvalidActionError as exc:
        raise _unsupported(commit, exc.message) from None


def _date_param(raw: str) -> str:
    """ISO 8601 with the offset (like ``%aI``) when that says exactly ``raw``, else ``raw``."""
    seconds, tz = raw.split(" ")
    hours, minutes = int(tz[1:3]), int(tz[3:5])
    if tz == "-0000" or hours > 23 or minutes > 59:
        return raw
    offset = timedelta(hours=hours, minutes=minutes) * (-1 if tz[0] == "-" else 1)
    try:
        iso = datetime.fromtimestamp(int(seconds), tz=timezone(offset)).isoformat()
    except (OverflowError, OSError, ValueError):
        return raw
    return iso if git_date(iso) == raw else raw


def commit_params(meta: SourceCommit) -> dict[str, JsonValue]:
    """The metadata parameters of the commit action re-creating ``meta`` (changes apart)."""
    if meta.header is not None or meta.author is None or meta.committer is None:
        return {"message": bytes_param(meta.message), "header": bytes_param(meta.header or b"")}
    params: dict[str, JsonValue] = {
        "message": bytes_param(meta.message),
        "author_name": bytes_param(meta.author.name),
        "author_email": bytes_param(meta.author.email),
        "author_date": _date_param(meta.author.date),
        "committer_name": bytes_param(meta.committer.name),
        "committer_email": bytes_param(meta.committer.email),
        "committer_date": _date_param(meta.committer.date),
    }
    if meta.encoding is not None:
        params["encoding"] = meta.encoding
    return params


def diff_entries(repo: Path, parent: str, commit: str) -> list[Entry]:
    """Changed paths from ``parent`` to ``commit``, checked as the adapter will check them.

    Raises:
        GitReplayUnsupportedError: see the module docstring.
        GitReplayError: git printed something unexpected.
    """
    out = run_git(repo, "diff-tree", "-r", "--no-renames", "--no-commit-id", "-z", parent, commit)
    tokens = out.split(b"\x00")
    entries: list[Entry] = []
    i = 0
    while i + 1 < len(tokens) and tokens[i]:
        meta, raw_path = tokens[i], tokens[i + 1]
        i += 2
        fields = meta.lstrip(b":").decode("ascii").split(" ")
        if len(fields) != 5 or fields[4] not in ("A", "M", "D", "T"):
            raise GitReplayError(f"unexpected git diff-tree output for commit {commit}",
                                 commit=commit)
        _old_mode, new_mode, _old_oid, new_oid, status = fields
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            raise _unsupported(commit, f"path {raw_path!r:.120} is not UTF-8") from None
        entry = Entry(status, new_mode, new_oid, path)
        if status != "D" and new_mode not in (REGULAR, EXECUTABLE, SYMLINK, GITLINK):
            raise _unsupported(commit, f"{path!r:.120} has mode {new_mode}, which git no longer "
                                       "writes into trees")
        try:
            parse_git_change(_change(entry, _PLACEHOLDER))
        except InvalidActionError as exc:
            raise _unsupported(commit, f"{exc.message} ({path!r:.120})") from None
        entries.append(entry)
    if len(entries) > MAX_CHANGES:
        raise _unsupported(commit, f"it changes {len(entries)} paths; one commit action holds "
                                   f"at most {MAX_CHANGES}")
    return entries


def _change(entry: Entry, content: str) -> dict[str, JsonValue]:
    if entry.status == "D":
        return {"op": "delete", "path": entry.path}
    if entry.new_mode == GITLINK:
        return {"op": "gitlink", "path": entry.path, "commit": entry.new_oid}
    if entry.new_mode == SYMLINK:
        return {"op": "symlink", "path": entry.path, "content": content}
    return {"op": "write", "path": entry.path, "content": content,
            "executable": entry.new_mode == EXECUTABLE}


def change_params(entries: list[Entry], blobs: dict[str, bytes],
                  put_blob: Callable[[bytes], str]) -> list[JsonValue]:
    """The ``changes`` of a commit action: deletes first, then writes, each sorted by path.

    Deletes come first so a file replaced by a directory (or the reverse) applies in order.

    Args:
        entries: from :func:`diff_entries`.
        blobs: ``object id -> bytes`` of every written file and link target.
        put_blob: stores bytes as an attachment and returns their ``sha256:`` digest.
    """
    deletes = sorted((e for e in entries if e.status == "D"), key=lambda e: e.path)
    writes = sorted((e for e in entries if e.status != "D"), key=lambda e: e.path)
    changes: list[JsonValue] = [_change(e, "") for e in deletes]
    for entry in writes:
        content = put_blob(blobs[entry.new_oid]) if entry.new_mode != GITLINK else ""
        changes.append(_change(entry, content))
    return changes
