"""The adapter protocol and the checks every adapter shares (DESIGN.md sections 4 and 5).

An adapter is the only way a run touches its environment. It answers four questions the step
engine needs to keep side effects exactly-once:

* ``observe()``: which instance is this, at which version, with which content fingerprint?
  An :class:`Observation` never copies the environment; it names it.
* ``execute()``: apply one write, idempotent by key, fenced by the lease version, and return the
  adapter's own receipt -- the authoritative evidence that the write committed.
* ``lookup_receipt()`` / ``receipts()``: read receipts back from the adapter's *own* store (a
  journal, the git history), never from the runtime's cache, so a crash that lost the runtime's
  copy can be reconciled and a cache that disagrees with the adapter can be caught.
* ``predict_post_state()`` / ``dry_run_diff()``: the one state a single pending write would
  produce, computed without changing anything, so recovery can tell "the pending write landed"
  from drift.

This module also holds what both concrete adapters validate identically: relative paths (no
absolute paths, ``..``, ``.git`` or adapter-owned areas), the ``write_file`` / ``delete_file``
action shapes, call arguments, and blob fetching with a sha256 check. It imports nothing from
Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import ValidationError

from runtime.core.canonical import DIGEST_RE, digest_bytes
from runtime.core.checkpoint import Action, EnvironmentRef, Receipt
from runtime.errors import (
    AdapterBusyError,
    AdapterError,
    AdapterStoreCorruptError,
    BlobDigestMismatchError,
    BlobUnavailableError,
    InvalidActionError,
    PathEscapeError,
    RatchetError,
)

BlobSource = Callable[[str], bytes]
"""``digest -> content``: the engine passes its attachment store's getter.

Adapters call it with the ``sha256:<hex>`` digest an action names and check the returned bytes
against that digest before writing anything.
"""

MAX_PATH_CHARS = 4096
MAX_KEY_CHARS = 200

WRITE_FILE = "write_file"
DELETE_FILE = "delete_file"


@dataclass(frozen=True)
class Observation:
    """What an adapter saw of its environment at one moment (DESIGN.md section 3, environment).

    Attributes:
        instance_id: the concrete environment instance (a workspace's id file, a repository's
            ``ratchet.instance-id``); a copy of the environment has another one.
        version: the adapter's own revision: ``"w<N>"`` for a workspace journal, the HEAD sha
            for git. It only moves through the adapter; out-of-band edits do not move it.
        state_fingerprint: ``"sha256:..."`` typed digest (``DigestKind.ENVIRONMENT``) of the
            content; out-of-band edits change it.
        kind: the adapter kind, ``"workspace"`` or ``"git"``.
        attachments: ``name -> bytes`` evidence the engine stores content-addressed (a listing,
            a status); each is kept small (at most a few tens of KiB).
    """

    instance_id: str
    version: str
    state_fingerprint: str
    kind: str
    attachments: dict[str, bytes] = field(default_factory=dict)

    def attachment_digests(self) -> dict[str, str]:
        """``name -> sha256:<hex>`` of each attachment, as the engine would store them."""
        return {name: digest_bytes(data) for name, data in sorted(self.attachments.items())}

    def ref(
        self,
        *,
        adapter_generation: int = 0,
        observation_version: int = 0,
        attachment_digests: Iterable[str] = (),
    ) -> EnvironmentRef:
        """This observation as the checkpoint's :class:`EnvironmentRef`.

        Args:
            adapter_generation: the lease version the observation was made under (>= 0).
            observation_version: the run's observation counter (>= 0).
            attachment_digests: digests of the attachments as stored by the engine.
        """
        return EnvironmentRef(
            adapter_kind=self.kind,
            instance_id=self.instance_id,
            version=self.version,
            state_fingerprint=self.state_fingerprint,
            adapter_generation=adapter_generation,
            observation_version=observation_version,
            attachments=list(attachment_digests),
        )


@runtime_checkable
class Adapter(Protocol):
    """What the step engine needs from an environment (DESIGN.md sections 4-6).

    Attributes:
        kind: ``"workspace"`` or ``"git"``.
        namespace: receipt namespace, ``"<kind>:<instance id>"``.
        adapter_version: receipt format/version tag, e.g. ``"ratchet-git/1"``.
    """

    kind: str
    namespace: str
    adapter_version: str

    def instance_id(self) -> str:
        """The environment instance's identity (stable for this instance, new for a copy)."""
        ...

    def observe(self) -> Observation:
        """Instance, version, content fingerprint and small evidence attachments."""
        ...

    def execute(
        self,
        action: Action,
        *,
        idempotency_key: str,
        intent_digest: str,
        fencing_token: int,
        blobs: BlobSource,
        approval_digest: str | None = None,
    ) -> Receipt:
        """Apply one write exactly once per idempotency key and return its receipt.

        If the adapter's own store already holds a receipt for ``idempotency_key`` it is returned
        unchanged and nothing is written, even when its intent digest differs (the engine
        compares and freezes the run on a conflict, DESIGN.md section 6).

        Raises:
            FencingTokenError: ``fencing_token`` is older than the newest the adapter has seen
                (DESIGN.md section 4, Ownership); nothing written.
            InvalidActionError, PathEscapeError, BlobDigestMismatchError,
            PreconditionFailedError: nothing written.
        """
        ...

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The receipt for ``idempotency_key`` from the adapter's own store, or None."""
        ...

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """Fingerprint the environment would have after this one write, changing nothing."""
        ...

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """Unified diff text of what this one write would change, changing nothing."""
        ...

    def receipts(self) -> list[Receipt]:
        """Every receipt in the adapter's store, oldest first."""
        ...


# --- shared validation ----------------------------------------------------------------------


@dataclass(frozen=True)
class FileChange:
    """One file-level change: write ``content`` (a ``sha256:`` digest) to ``path`` or delete it."""

    op: Literal["write", "delete"]
    path: str
    content: str | None = None
    executable: bool = False


def check_relative_path(path: Any, *, reserved: Iterable[str] = ()) -> str:
    """Validate a relative, ``/``-separated path inside an environment and return it.

    Rejected: non-strings, empty paths, absolute paths, backslashes, NUL or control characters,
    empty, ``.`` or ``..`` components, any ``.git`` component (any case) and a first component
    in ``reserved`` (case-insensitive; the workspace's ``.ratchet``). Symlinks are checked by
    each adapter against its own state, because only it knows what is on disk or in the tree.

    Args:
        path: the candidate path (an action's ``target`` or a change's ``path``).
        reserved: first-component names the adapter owns.

    Raises:
        PathEscapeError: the path is rejected.
    """
    if not isinstance(path, str) or not path:
        raise PathEscapeError("path must be a non-empty string", path=repr(path)[:80])
    if len(path) > MAX_PATH_CHARS:
        raise PathEscapeError(f"path is longer than {MAX_PATH_CHARS} characters", path=path[:80])
    if path.startswith("/"):
        raise PathEscapeError("absolute paths are not allowed", path=path)
    if "\\" in path or any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        # Backslashes are separators on other systems and control characters break the
        # line-oriented evidence (git trailers, diffs): refuse rather than guess.
        raise PathEscapeError("path contains a backslash or a control character", path=repr(path))
    parts = path.split("/")
    reserved_lower = {name.lower() for name in reserved}
    for index, part in enumerate(parts):
        if part in ("", ".", ".."):
            raise PathEscapeError("path has an empty, '.' or '..' component", path=path)
        if part.lower() == ".git":
            raise PathEscapeError("paths into .git are not allowed", path=path)
        if index == 0 and part.lower() in reserved_lower:
            raise PathEscapeError("path is inside the adapter's own journal", path=path)
    return path


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
               approval_digest: Any) -> None:
    """Validate ``execute`` call arguments before anything is read or written.

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


def fetch_blob(blobs: BlobSource, content: str, *, path: str) -> bytes:
    """Fetch ``content`` from ``blobs`` and check its sha256 before anything is written.

    Args:
        blobs: the engine's attachment getter.
        content: ``sha256:<hex>`` digest named by the action.
        path: the path being written, for the error context.

    Raises:
        BlobDigestMismatchError: the bytes hash to something else.
        BlobUnavailableError: the source raised ``LookupError`` or ``OSError``, or returned
            something that is not bytes. Errors from the runtime's own tree pass through.
    """
    try:
        data = blobs(content)
    except RatchetError:
        raise
    except (LookupError, OSError) as exc:
        raise BlobUnavailableError(f"blob source failed: {type(exc).__name__}", path=path,
                                   content=content) from None
    if not isinstance(data, bytes | bytearray | memoryview):
        raise BlobUnavailableError("blob source returned something that is not bytes", path=path,
                                   content=content)
    data = bytes(data)
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != content:
        raise BlobDigestMismatchError(path=path, expected=content, actual=actual)
    return data


def receipt_from_json(raw: bytes | str, *, where: str) -> Receipt:
    """Parse a stored receipt strictly (JSON mode, so timestamps round-trip).

    Raises:
        AdapterStoreCorruptError: the stored receipt does not validate.
    """
    try:
        return Receipt.model_validate_json(raw)
    except ValidationError as exc:
        raise AdapterStoreCorruptError(
            f"stored receipt does not validate: {exc.error_count()} errors", where=where
        ) from None


__all__ = [
    "Adapter",
    "AdapterError",
    "BlobSource",
    "DELETE_FILE",
    "FileChange",
    "Observation",
    "WRITE_FILE",
    "check_call",
    "check_content_digest",
    "check_no_nested_paths",
    "check_relative_path",
    "fetch_blob",
    "parse_change",
    "parse_file_action",
    "receipt_from_json",
]


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str], *, timeout: float, target: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created 0644 if missing) for the ``with`` block.

    Two processes acting on one environment never interleave. Closing the descriptor releases
    the lock, and the kernel releases it when the holder is SIGKILLed, so a crash never leaves
    the environment locked.

    Args:
        path: the lock file.
        timeout: seconds to wait for the lock.
        target: the environment's path, for the error.

    Raises:
        AdapterBusyError: the lock was not free within ``timeout`` seconds (retryable).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise AdapterBusyError(target=target, waited_seconds=timeout) from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)
