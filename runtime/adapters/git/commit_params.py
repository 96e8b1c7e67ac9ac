"""The git adapter's ``commit`` action: its parameters, and what a commit may hold.

One ``commit`` action becomes one commit (DESIGN.md section 5: one key, one effect)::

    Action(kind="commit", target="", params={
        "message": <text> | {"base64": ...},          # the message bytes, verbatim
        "author_name": <text> | {"base64": ...}, "author_email": ..., "author_date": <date>,
        "changes": [{"op": "delete", "path"},
                    {"op": "write", "path", "content": "sha256:...", "executable": bool},
                    {"op": "symlink", "path", "content": "sha256:<digest of the link target>"},
                    {"op": "gitlink", "path", "commit": "<object id>"}, ...],
        # optional, all or none of the committer fields:
        "committer_name": ..., "committer_email": ..., "committer_date": <date>,
        "encoding": "<the commit's encoding header, verbatim>",
    })

    # or, for a header the fields above cannot say byte for byte (an identity line git's
    # parser reads ambiguously, gpgsig / mergetag / any other extra header, unusual order):
    Action(kind="commit", target="", params={
        "message": ..., "changes": [...],
        "header": <text> | {"base64": ...},   # every header line after tree and parents
    })

Byte-valued fields are plain strings when their bytes are UTF-8, else ``{"base64": ...}``, so any
message or identity git holds round-trips byte for byte. Dates are ISO 8601 with an offset or
git's raw ``"<epoch> <+hhmm>"`` (kept verbatim, so ``-0000`` survives). ``changes`` may be
empty: an empty commit, or a merge that changed nothing on the first-parent line, is still one
commit.

What is refused, and why: a NUL byte in the message or the header (``git log`` stops reading
the commit at it, so the receipt trailers after it could not be read back); a message git reads
no trailers after (it opens with a scissors line); a ``header`` that would change the parents
(it starts with a ``parent``, ``tree`` or continuation line) or holds a blank line; ``<``,
``>``, NUL or a newline in a name or email given as fields (they would end the identity line;
the ``header`` form carries such lines verbatim); an ``encoding`` that is not ASCII-compatible (the
ASCII trailers appended to the message would not decode); paths git refuses to check out
(``.git`` in any spelling, empty, ``.`` or ``..`` components) and a symlink named like a file git
reads from the tree (``.gitmodules``, ``.gitattributes``, ``.gitignore``, ``.mailmap``). The
git-history planner runs the same checks over a whole range when the run is created, so nothing
is refused halfway through a run. Imports nothing from Django.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import JsonValue

from runtime.adapters.actions import (
    DELETE_FILE,
    WRITE_FILE,
    check_content_digest,
    parse_file_action,
)
from runtime.adapters.git.receipts import receipt_fits
from runtime.adapters.paths import MAX_PATH_CHARS
from runtime.core.checkpoint import Action
from runtime.errors import InvalidActionError, PathEscapeError

COMMIT = "commit"
MAX_CHANGES = 10_000

REGULAR, EXECUTABLE, SYMLINK, GITLINK = "100644", "100755", "120000", "160000"

_REQUIRED = {"message", "author_name", "author_email", "author_date", "changes"}
_COMMITTER = {"committer_name", "committer_email", "committer_date"}
_OPTIONAL = _COMMITTER | {"encoding"}
_HEADER_FORM = {"message", "changes", "header"}
_RAW_DATE = re.compile(r"^@?(\d{1,12}) ([+-]\d{4})$")
_OID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_ENCODING = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$")
_IDENT_BAD = (b"<", b">", b"\n", b"\0")
_TREE_READ_FILES = {".gitmodules", ".gitattributes", ".gitignore", ".mailmap"}
_TRAILER_PROBE = "\n\nIdempotency-Key: Az09-_.:/+=\n"


@dataclass(frozen=True)
class GitChange:
    """One tree entry a commit changes.

    Attributes:
        path: ``/``-separated path in the tree.
        mode: ``"100644"``, ``"100755"``, ``"120000"`` (symlink) or ``"160000"`` (gitlink);
            None for a delete.
        content: ``sha256:`` digest of the blob bytes (file content or link target); None for
            deletes and gitlinks.
        oid: the submodule commit a gitlink points at (never fetched); None otherwise.
    """

    path: str
    mode: str | None
    content: str | None = None
    oid: str | None = None

    @property
    def op(self) -> str:
        return "delete" if self.mode is None else "write"


@dataclass(frozen=True)
class Identity:
    """An author or committer: name and email bytes, and git's raw date ``"<epoch> <+hhmm>"``."""

    name: bytes
    email: bytes
    date: str

    def line(self) -> bytes:
        """The identity as it follows ``author `` / ``committer `` in a commit object."""
        return self.name + b" <" + self.email + b"> " + self.date.encode("ascii")


@dataclass(frozen=True)
class CommitPlan:
    """A parsed write: the changes and the commit metadata (None: Ratchet's own defaults)."""

    changes: list[GitChange]
    message: bytes
    author: Identity | None
    committer: Identity | None
    encoding: str | None
    strict_links: bool
    """True for ``write_file`` / ``delete_file``: they never replace or delete a symlink."""
    header: bytes | None = None
    """The header lines after tree and parents, verbatim (author, committer, encoding None)."""


def git_date(value: Any) -> str:
    """Normalise a date to git's raw ``"<epoch> <+hhmm>"`` form.

    Accepts raw form (optionally ``@``-prefixed; kept verbatim otherwise) or ISO 8601 with an
    offset (``2026-01-02T03:04:05+01:00``, ``...Z``). Sub-second parts are dropped (git stores
    whole seconds). Raw form keeps git's lenient date parser out of the picture.

    Raises:
        InvalidActionError: anything else, including ISO dates without an offset.
    """
    if not isinstance(value, str):
        raise InvalidActionError("dates must be strings")
    raw = _RAW_DATE.match(value.strip())
    if raw:
        return f"{raw.group(1)} {raw.group(2)}"
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidActionError("date is neither ISO 8601 nor '<epoch> <+hhmm>'",
                                 date=value[:40]) from None
    offset = when.utcoffset()
    if offset is None:
        raise InvalidActionError("date needs a UTC offset", date=value[:40])
    minutes = int(offset / timedelta(minutes=1))
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{int(when.timestamp())} {sign}{minutes // 60:02d}{minutes % 60:02d}"


def bytes_param(raw: bytes) -> JsonValue:
    """``raw`` as an action parameter: the text when it is UTF-8, else ``{"base64": ...}``."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def param_bytes(value: Any, *, name: str) -> bytes:
    """The bytes a :func:`bytes_param` value stands for.

    Raises:
        InvalidActionError: neither a string nor ``{"base64": <valid base64>}``.
    """
    if isinstance(value, str):
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidActionError(f"{name} holds a lone surrogate; send bytes as base64"
                                     ) from None
    if isinstance(value, Mapping) and set(value) == {"base64"} and isinstance(value["base64"], str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except binascii.Error:
            pass
    raise InvalidActionError(f"{name} must be text or {{'base64': ...}}")


def check_message(message: bytes) -> bytes:
    """Return ``message`` if the receipt trailers appended to it can be read back.

    Raises:
        InvalidActionError: it holds a NUL byte.
    """
    if b"\0" in message:
        raise InvalidActionError("commit message holds a NUL byte; git log stops reading there")
    if not receipt_fits(message):
        raise InvalidActionError("git reads no trailers after this commit message (it opens "
                                 "with a scissors line), so the receipt could not be read back")
    return message


def check_header(header: bytes) -> bytes:
    """Return ``header`` (the header lines after tree and parents) if written verbatim after
    the new tree and parent lines it keeps the commit's parents and its receipt readable.

    Raises:
        InvalidActionError: a NUL byte, a blank line, no final newline, a first line git would
            read as another tree or parent or as a continuation of the parent line, or an
            ``encoding`` the receipt trailers would not survive.
    """
    if b"\0" in header:
        raise InvalidActionError("commit header holds a NUL byte; git log stops reading there")
    if not header.endswith(b"\n") or b"\n\n" in header or header.startswith(b"\n"):
        raise InvalidActionError("commit header must be whole lines with no blank line")
    if header.startswith((b"parent ", b"tree ", b" ")):
        raise InvalidActionError("commit header would change the commit's tree or parents")
    for line in header.split(b"\n"):
        if line.startswith(b"encoding "):
            check_encoding(line[9:].decode("ascii", "replace"))
            break
    return header


def check_ident(name: bytes, email: bytes, date: Any, *, role: str) -> Identity:
    """An :class:`Identity`, checked so the commit's identity line keeps its structure.

    Raises:
        InvalidActionError: ``<``, ``>``, NUL or a newline in the name or email, or a bad date.
    """
    for label, value in (("name", name), ("email", email)):
        if len(value) > 1000 or any(bad in value for bad in _IDENT_BAD):
            raise InvalidActionError(f"{role} {label} must be at most 1000 bytes without <, >, "
                                     "NUL or newline")
    return Identity(name=name, email=email, date=git_date(date))


def check_encoding(value: Any) -> str:
    """Return an ``encoding`` header value the receipt trailers survive.

    Unknown names are accepted (git then shows the bytes as they are, trailers included);
    known encodings must encode ASCII as ASCII.

    Raises:
        InvalidActionError: not a plain token, or an ASCII-incompatible encoding (UTF-16, ...).
    """
    if not isinstance(value, str) or not _ENCODING.match(value):
        raise InvalidActionError("encoding must be a short token such as ISO-8859-1")
    try:
        codec = codecs.lookup(value)
    except LookupError:
        return value
    try:
        compatible = codec.encode(_TRAILER_PROBE)[0] == _TRAILER_PROBE.encode("ascii")
    except (UnicodeError, ValueError):
        compatible = False
    if not compatible:
        raise InvalidActionError(f"encoding {value!r} is not ASCII-compatible; the receipt "
                                 "trailers could not be read back")
    return value


def check_git_path(path: Any) -> str:
    """Validate a path a git tree can hold and a checkout writes inside the working tree.

    Looser than the shared rule for file actions: backslashes and control characters other
    than NUL are legal in git paths. Refused: absolute, empty, ``.`` or ``..`` components, and
    ``.git`` in any spelling git refuses (any case, trailing dots or spaces, ``git~1``).

    Raises:
        PathEscapeError: naming the path.
    """
    if not isinstance(path, str) or not path:
        raise PathEscapeError("path must be a non-empty string", path=repr(path)[:80])
    if len(path) > MAX_PATH_CHARS or "\0" in path:
        raise PathEscapeError("path is too long or holds a NUL", path=repr(path)[:80])
    if path.startswith("/"):
        raise PathEscapeError("absolute paths are not allowed", path=path)
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise PathEscapeError("path has an empty, '.' or '..' component", path=path)
        lower = part.lower()
        if lower.rstrip(" .") == ".git" or lower == "git~1":
            raise PathEscapeError("paths into .git are not allowed", path=path)
    return path


def parse_git_change(entry: Any) -> GitChange:
    """Parse one entry of a commit action's ``changes`` (shapes in the module docstring).

    Raises:
        InvalidActionError: wrong shape or types. PathEscapeError: bad path.
    """
    if not isinstance(entry, Mapping):
        raise InvalidActionError("each change must be an object")
    op = entry.get("op")
    allowed = {"delete": {"op", "path"}, "write": {"op", "path", "content", "executable"},
               "symlink": {"op", "path", "content"}, "gitlink": {"op", "path", "commit"}}
    if op not in allowed:
        raise InvalidActionError("change op must be write, symlink, gitlink or delete",
                                 op=repr(op)[:40])
    unknown = set(entry) - allowed[op]
    if unknown:
        raise InvalidActionError(f"unknown change fields {sorted(unknown)}", op=op)
    path = check_git_path(entry.get("path"))
    if op == "delete":
        return GitChange(path=path, mode=None)
    if op == "gitlink":
        oid = entry.get("commit")
        if not isinstance(oid, str) or not _OID.match(oid):
            raise InvalidActionError("a gitlink names a full commit id", path=path)
        return GitChange(path=path, mode=GITLINK, oid=oid)
    content = check_content_digest(entry.get("content"), path=path)
    if op == "symlink":
        if path.rsplit("/", 1)[-1].lower() in _TREE_READ_FILES:
            raise InvalidActionError("git refuses a symlink in place of a file it reads from "
                                     "the tree", path=path)
        return GitChange(path=path, mode=SYMLINK, content=content)
    executable = entry.get("executable", False)
    if not isinstance(executable, bool):
        raise InvalidActionError("executable must be a boolean", path=path)
    return GitChange(path=path, mode=EXECUTABLE if executable else REGULAR, content=content)


def _check_one_tree(changes: list[GitChange]) -> None:
    """Reject two changes to one path, or an entry written below another written entry.

    Deletes may sit below a written path (a directory turned into a file) and writes below a
    deleted one (a file turned into a directory): real histories hold both.

    Raises:
        InvalidActionError: naming the offending path.
    """
    paths = [c.path for c in changes]
    if len(set(paths)) != len(paths):
        raise InvalidActionError("two changes name the same path")
    written = {c.path for c in changes if c.mode is not None}
    for path in written:
        parts = path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in written:
                raise InvalidActionError("a change writes below another change's file", path=path)


def parse_action(action: Action, *, committer_default: Identity) -> CommitPlan:
    """Parse ``write_file`` / ``delete_file`` / ``commit`` into a :class:`CommitPlan`.

    File actions commit as ``committer_default`` with the message ``ratchet: <verb> <path>``.

    Raises:
        InvalidActionError, PathEscapeError: naming what is wrong; nothing is read or written.
    """
    if action.kind in (WRITE_FILE, DELETE_FILE):
        change = parse_file_action(action)
        verb = "write" if change.op == "write" else "delete"
        mode = None if change.op == "delete" else EXECUTABLE if change.executable else REGULAR
        return CommitPlan([GitChange(change.path, mode, change.content)],
                          f"ratchet: {verb} {change.path}".encode(), committer_default,
                          committer_default, None, strict_links=True)
    if action.kind != COMMIT:
        raise InvalidActionError(f"unsupported action kind {action.kind!r}")
    if action.target:
        raise InvalidActionError("a commit action has an empty target")
    p = action.params
    keys = set(p)
    if "header" in keys:
        if keys != _HEADER_FORM:
            raise InvalidActionError(f"a commit with a header takes exactly {sorted(_HEADER_FORM)}")
        changes = _changes(p["changes"])
        return CommitPlan(changes, check_message(param_bytes(p["message"], name="message")),
                          None, None, None, strict_links=False,
                          header=check_header(param_bytes(p["header"], name="header")))
    if not _REQUIRED <= keys or keys - _REQUIRED - _OPTIONAL:
        raise InvalidActionError(f"commit params must be {sorted(_REQUIRED)} plus optionally "
                                 f"{sorted(_OPTIONAL)}")
    if keys & _COMMITTER and not _COMMITTER <= keys:
        raise InvalidActionError("committer name, email and date come together")
    message = check_message(param_bytes(p["message"], name="message"))
    author = check_ident(param_bytes(p["author_name"], name="author_name"),
                         param_bytes(p["author_email"], name="author_email"),
                         p["author_date"], role="author")
    committer = committer_default
    if _COMMITTER <= keys:
        committer = check_ident(param_bytes(p["committer_name"], name="committer_name"),
                                param_bytes(p["committer_email"], name="committer_email"),
                                p["committer_date"], role="committer")
    encoding = check_encoding(p["encoding"]) if "encoding" in p else None
    return CommitPlan(_changes(p["changes"]), message, author, committer, encoding,
                      strict_links=False)


def _changes(raw_changes: Any) -> list[GitChange]:
    if not isinstance(raw_changes, list) or len(raw_changes) > MAX_CHANGES:
        raise InvalidActionError(f"changes must be a list of at most {MAX_CHANGES} changes")
    changes = [parse_git_change(entry) for entry in raw_changes]
    _check_one_tree(changes)
    return changes
