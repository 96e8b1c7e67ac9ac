"""The file actions adapters accept and the ``execute`` call arguments (DESIGN.md section 5).

Shapes shared by both adapters: ``write_file`` / ``delete_file`` actions, the git adapter's
per-file ``changes`` entries (:class:`FileChange`), and the idempotency key, intent digest,
fencing token and approval digest of an ``execute`` call. Everything is checked before anything
is read or written. Imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runtime.adapters.deadline import CommitDeadline
from runtime.adapters.paths import check_relative_path
from runtime.core.canonical import DIGEST_RE
from runtime.core.checkpoint import Action
from runtime.errors import InvalidActionError

MAX_KEY_CHARS = 200

WRITE_FILE = "write_file"
DELETE_FILE = "delete_file"


@dataclass(frozen=True)
class FileChange:
    """One file-level change: write ``content`` (a ``sha256:`` digest) to ``path`` or delete it."""

    op: Literal["write", "delete"]
    path: str
    content: str | None = None
    executable: bool = False


def check_content_digest(value: Any, *, path: str) -> str:
    """Return ``value`` if it is a ``sha256:<64 hex>`` content digest.

    Raises:
        InvalidActionError: otherwise.
    """
    if not isinstance(value, str) or not DIGEST_RE.match(value):
        raise InvalidActionError("content must be a sha256:<hex> digest", path=path)
    return value


def _exact_params(action: Action, required: set[str], optional: set[str]) -> None:
    keys = set(action.params)
    missing = required - keys
    unknown = keys - required - optional
    if missing or unknown:
        raise InvalidActionError(
            f"{action.kind} params must have {sorted(required)} (optional {sorted(optional)}); "
            f"missing {sorted(missing)}, unknown {sorted(unknown)}",
            path=action.target,
        )


def parse_change(entry: Any, *, reserved: Iterable[str] = ()) -> FileChange:
    """Parse one ``{"op": "write"|"delete", "path", "content", "executable"}`` change.

    Raises:
        InvalidActionError: wrong shape or types. PathEscapeError: bad path.
    """
    if not isinstance(entry, Mapping):
        raise InvalidActionError("each change must be an object")
    op = entry.get("op")
    if op == "write":
        allowed = {"op", "path", "content", "executable"}
    elif op == "delete":
        allowed = {"op", "path"}
    else:
        raise InvalidActionError("change op must be 'write' or 'delete'", op=repr(op)[:40])
    unknown = set(entry) - allowed
    if unknown:
        raise InvalidActionError(f"unknown change fields {sorted(unknown)}", op=op)
    path = check_relative_path(entry.get("path"), reserved=reserved)
    if op == "delete":
        return FileChange(op="delete", path=path)
    executable = entry.get("executable", False)
    if not isinstance(executable, bool):
        raise InvalidActionError("executable must be a boolean", path=path)
    return FileChange(op="write", path=path,
                      content=check_content_digest(entry.get("content"), path=path),
                      executable=executable)


def parse_file_action(action: Action, *, reserved: Iterable[str] = ()) -> FileChange:
    """Parse a ``write_file`` / ``delete_file`` action into a :class:`FileChange`.

    Shapes: ``write_file``: ``target`` = relative path, ``params = {"content": "sha256:...",
    "executable": bool (optional, default false)}``; ``delete_file``: ``params = {}``.

    Raises:
        InvalidActionError: another kind or a malformed shape. PathEscapeError: bad path.
    """
    if action.kind == WRITE_FILE:
        _exact_params(action, {"content"}, {"executable"})
        return parse_change({"op": "write", "path": action.target, **action.params},
                            reserved=reserved)
    if action.kind == DELETE_FILE:
        _exact_params(action, set(), set())
        return parse_change({"op": "delete", "path": action.target}, reserved=reserved)
    raise InvalidActionError(f"unsupported action kind {action.kind!r}", path=action.target)


def check_no_nested_paths(changes: Iterable[FileChange]) -> None:
    """Reject two changes to one path, or a change below a path another change *writes*.

    Writing below a path that the same commit deletes is allowed: that is a file turning into a
    directory (``a`` deleted, ``a/b`` written), which real histories contain.

    Raises:
        InvalidActionError: naming the offending path.
    """
    changes = list(changes)
    written = {change.path for change in changes if change.op == "write"}
    seen: set[str] = set()
    for path in sorted(change.path for change in changes):
        if path in seen:
            raise InvalidActionError("two changes name the same path", path=path)
        parts = path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in written:
                raise InvalidActionError("a change writes below another change's file", path=path)
        seen.add(path)


def check_call(*, idempotency_key: Any, intent_digest: Any, fencing_token: Any,
               approval_digest: Any, not_after: Any = None) -> None:
    """Validate ``execute`` call arguments before anything is read or written.

    ``not_after`` is None or a :class:`~runtime.adapters.deadline.CommitDeadline` (DESIGN.md
    section 5.5).

    The key must be 1-200 characters without control characters or surrounding whitespace
    (it is written into a git trailer or a journal line and must read back identically).

    Raises:
        InvalidActionError: naming the bad argument (never its value when it is not a string).
    """
    if (not isinstance(idempotency_key, str) or not idempotency_key
            or len(idempotency_key) > MAX_KEY_CHARS
            or idempotency_key != idempotency_key.strip()
            or any(ord(ch) < 32 or ord(ch) == 127 for ch in idempotency_key)):
        raise InvalidActionError("idempotency key must be 1-200 printable characters")
    if not isinstance(intent_digest, str) or not DIGEST_RE.match(intent_digest):
        raise InvalidActionError("intent digest must be sha256:<hex>",
                                 idempotency_key=idempotency_key)
    if approval_digest is not None and (
            not isinstance(approval_digest, str) or not DIGEST_RE.match(approval_digest)):
        raise InvalidActionError("approval digest must be sha256:<hex> or None",
                                 idempotency_key=idempotency_key)
    if not isinstance(fencing_token, int) or isinstance(fencing_token, bool) or fencing_token < 0:
        raise InvalidActionError("fencing token must be a non-negative integer",
                                 idempotency_key=idempotency_key)
    if not_after is not None and not isinstance(not_after, CommitDeadline):
        raise InvalidActionError("not_after must be a CommitDeadline or None",
                                 idempotency_key=idempotency_key)
