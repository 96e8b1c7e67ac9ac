"""Workspace adapter: a plain directory as an environment (DESIGN.md sections 4 and 5).

Layout. Everything the adapter owns lives in ``<root>/.ratchet/``:

* ``instance-id``   the workspace's identity, a random uuid written once;
* ``journal.jsonl`` the append-only receipt journal, one canonical-JSON line per record, each
  line fsync'd before the call goes on;
* ``fence``         the newest fencing token accepted, replaced atomically (temp, fsync, rename);
* ``lock``          an ``fcntl.flock`` lock file: two processes never interleave on one workspace.

Nothing under ``.ratchet/`` counts towards the fingerprint and no action may write there.

Version and fingerprint. ``version`` is ``"w<N>"`` where N is the number of committed receipts in
the journal: it only moves through the adapter. The fingerprint is a typed digest
(``DigestKind.ENVIRONMENT``) over ``{relative path: {sha256, executable}}`` for every regular
file outside ``.ratchet/`` (symlinks are recorded by their target, never followed; empty
directories do not count). So an out-of-band edit changes the fingerprint but not the version:
exactly the "same version, different content" drift the engine must catch.

Crash ordering (why a two-phase journal). The obvious order -- rename the file into place, then
append the receipt -- has a window in which the file changed but no receipt exists: after a
SIGKILL there, ``lookup_receipt`` says None while the effect is visible, and DESIGN.md section 5
forbids claiming a replay without the adapter's receipt, so the run could only go to a human.
This adapter closes the window instead:

1. append and fsync a ``prepared`` record naming the key, intent, fencing token, path, the
   target's pre-state and its post-state (content digest and executable bit), and the temp name;
2. write the temp file in the target's directory, fsync it, ``rename`` it over the target (or
   ``unlink`` for a delete) and fsync the directory -- the commit point of the effect;
3. append and fsync a ``committed`` record carrying the full receipt.

Every public call first runs recovery under the lock: a ``prepared`` record without an outcome
is rolled *forward* (a ``committed`` record with the receipt, marked ``"recovered": true``) when
the target shows the post-state, rolled *back* (an ``aborted`` record; the key is free again)
when it still shows the pre-state, and its temp file is removed. A target showing neither (it
was edited out of band after the crash) is left unresolved and lookups of that key raise
:class:`ReceiptIndeterminateError` -- only a human can say what happened. A torn last journal
line (killed mid-append) is truncated first; because records are fsync'd in order, a torn
``committed`` line leaves its ``prepared`` record dangling and recovery re-derives the outcome.
The receipt's ``committed_at`` for a recovered write is the recovery time: never earlier than
the real rename, so an approval-expiry check errs on the side of review.

Writes never follow symlinks: directories are walked with ``O_NOFOLLOW`` relative to directory
file descriptors, and a symlink anywhere on a path is rejected (:class:`PathEscapeError`), so a
link swapped in by another process cannot redirect a write outside the workspace.

This module imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime.adapters.base import (
    BlobSource,
    FileChange,
    Observation,
    check_call,
    exclusive_lock,
    fetch_blob,
    parse_file_action,
    receipt_from_json,
)
from runtime.core.canonical import DigestKind, canonical_json, digest
from runtime.core.checkpoint import Action, Receipt
from runtime.core.crashpoints import crash_point, register
from runtime.errors import (
    AdapterStoreCorruptError,
    AdapterTargetError,
    ConcurrentWriteError,
    FencingTokenError,
    PathEscapeError,
    PreconditionFailedError,
    ReceiptIndeterminateError,
)

KIND = "workspace"
ADAPTER_VERSION = "ratchet-workspace/1"
JOURNAL_DIR = ".ratchet"
TMP_PREFIX = ".ratchet-tmp-"
LOCK_TIMEOUT_SECONDS = 30.0
MAX_LISTING_BYTES = 64 * 1024

CP_BEFORE_WRITE = register(
    "workspace.before_write",
    "workspace: action validated, blob checked, fence persisted; nothing journalled for the key",
)
CP_AFTER_PREPARE = register(
    "workspace.after_prepare",
    "workspace: 'prepared' record fsync'd; temp file not created, target untouched",
)
CP_BEFORE_RENAME = register(
    "workspace.before_rename",
    "workspace: temp file written and fsync'd (write) ; target not yet renamed over or unlinked",
)
CP_AFTER_RENAME = register(
    "workspace.after_rename",
    "workspace: target renamed into place or unlinked, directory fsync'd; no 'committed' record",
)
CP_AFTER_WRITE = register(
    "workspace.after_write",
    "workspace: 'committed' record with the receipt fsync'd; the call has not returned yet",
)

Entry = dict[str, Any]
"""A fingerprint entry: ``{"sha256": hex, "executable": bool}`` for a regular file,
``{"symlink": target}``, ``{"directory": true}`` or ``{"special": kind}``."""

_UNREADABLE: Entry = {"unreadable": True}
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _now() -> datetime:
    return datetime.now(UTC)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _display_name(name: str) -> str:
    # Non-UTF-8 names come back from the OS with surrogate escapes, which canonical JSON refuses;
    # show their bytes instead so the fingerprint still covers them.
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _file_entry(fd: int) -> Entry:
    st = os.fstat(fd)
    h = hashlib.sha256()
    while chunk := os.read(fd, 1 << 20):
        h.update(chunk)
    return {"sha256": h.hexdigest(), "executable": bool(st.st_mode & stat.S_IXUSR)}


def _entry_at(dir_fd: int, name: str) -> Entry | None:
    """The entry named ``name`` in the open directory ``dir_fd``, never following a symlink."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return {"symlink": _display_name(os.readlink(name, dir_fd=dir_fd))}
    if stat.S_ISDIR(st.st_mode):
        return {"directory": True}
    if not stat.S_ISREG(st.st_mode):
        return {"special": stat.filemode(st.st_mode)[0]}
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return _UNREADABLE
    try:
        return _file_entry(fd)
    finally:
        os.close(fd)


def _mode_text(executable: bool) -> str:
    return "100755" if executable else "100644"


@dataclass
class _Journal:
    """The journal replayed into memory: committed receipts and writes still in flight."""

    committed: list[Receipt] = field(default_factory=list)
    by_key: dict[str, Receipt] = field(default_factory=dict)
    dangling: dict[str, dict[str, Any]] = field(default_factory=dict)
    max_token: int = 0


class WorkspaceAdapter:
    """A directory as an environment; see the module docstring for layout and crash ordering.

    Args:
        target: path of an existing directory (str or Path). Its ``.ratchet/`` journal dir is
            created on first use.
        lock_timeout: seconds to wait for the workspace lock before :class:`AdapterBusyError`.

    Raises:
        AdapterTargetError: the target is not a directory, or ``.ratchet`` is not a directory.
        AdapterStoreCorruptError: the instance id file is unreadable.
    """

    kind = KIND
    adapter_version = ADAPTER_VERSION

    def __init__(self, target: str | Path, *, lock_timeout: float = LOCK_TIMEOUT_SECONDS) -> None:
        path = Path(target)
        try:
            st = os.stat(path)
        except OSError:
            raise AdapterTargetError("workspace directory does not exist",
                                     target=str(path)) from None
        if not stat.S_ISDIR(st.st_mode):
            raise AdapterTargetError("workspace target is not a directory", target=str(path))
        self.root = path.resolve()
        self._meta = self.root / JOURNAL_DIR
        self._lock_timeout = lock_timeout
        try:
            meta_st = os.lstat(self._meta)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(self._meta, 0o755)
            self._fsync_dir(self.root)
            meta_st = os.lstat(self._meta)
        if not stat.S_ISDIR(meta_st.st_mode):
            raise AdapterTargetError(f"{JOURNAL_DIR} in the workspace is not a directory",
                                     target=str(self.root))
        with self._locked():
            self._instance_id = self._load_or_create_instance_id()
            if not self._journal_path.exists():
                os.close(os.open(self._journal_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC,
                                 0o644))
                self._fsync_dir(self._meta)
        self.namespace = f"{KIND}:{self._instance_id}"

    # --- public API -----------------------------------------------------------------------

    def instance_id(self) -> str:
        """The workspace's uuid from ``.ratchet/instance-id`` (created once)."""
        return self._instance_id

    def observe(self) -> Observation:
        """Recover interrupted writes, then return instance, ``"w<N>"``, fingerprint and a listing.

        The ``listing.txt`` attachment has one ``<mode> <sha256> <path>`` line per entry, cut
        at 64 KiB.

        Raises:
            AdapterBusyError, AdapterStoreCorruptError.
        """
        with self._locked():
            journal = self._recover_locked()
            entries = self._scan()
        return Observation(
            instance_id=self._instance_id,
            version=f"w{len(journal.committed)}",
            state_fingerprint=self._fingerprint(entries),
            kind=KIND,
            attachments={"listing.txt": self._listing(entries)},
        )

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
        """Write or delete one file atomically, exactly once per idempotency key.

        Args:
            action: ``write_file`` (target path, ``{"content": "sha256:...", "executable":
                bool}``) or ``delete_file`` (target path, ``{}``).
            idempotency_key: 1-200 printable characters, derived before the write.
            intent_digest: ``sha256:`` digest of the action, recorded in the receipt.
            fencing_token: the caller's lease version (>= 0).
            blobs: ``digest -> bytes`` for the file content.
            approval_digest: bound into the receipt when the write was approved.

        Returns:
            The new receipt, or the stored one unchanged when the key already has one (even
            for another intent digest: DESIGN.md section 6 makes that the engine's conflict).

        Raises:
            FencingTokenError: ``fencing_token`` is below the newest seen; nothing written.
            ReceiptIndeterminateError: an earlier interrupted write is unresolved.
            InvalidActionError, PathEscapeError, BlobDigestMismatchError,
            BlobUnavailableError, PreconditionFailedError: nothing written.
            AdapterBusyError: the lock was not obtained in time; nothing written.
        """
        check_call(idempotency_key=idempotency_key, intent_digest=intent_digest,
                   fencing_token=fencing_token, approval_digest=approval_digest)
        with self._locked():
            journal = self._recover_locked()
            self._check_fence(journal, fencing_token, idempotency_key)
            existing = journal.by_key.get(idempotency_key)
            if existing is not None:
                self._raise_fence(fencing_token)
                return existing
            if journal.dangling:
                stuck = next(iter(journal.dangling))
                raise ReceiptIndeterminateError(
                    "an earlier interrupted write is unresolved; no write until a human decides",
                    instance_id=self._instance_id, idempotency_key=stuck)
            change = self._parse(action)
            content = self._fetch(change, blobs)
            pre = self._check_target(change)
            self._raise_fence(fencing_token)
            crash_point(CP_BEFORE_WRITE)
            return self._apply(change, content, pre, journal, idempotency_key=idempotency_key,
                               intent_digest=intent_digest, fencing_token=fencing_token,
                               approval_digest=approval_digest)

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The committed receipt for ``idempotency_key`` from the journal, or None.

        Runs recovery first, so a write killed after its rename is found here.

        Raises:
            ReceiptIndeterminateError: the key's interrupted write cannot be classified.
            AdapterBusyError, AdapterStoreCorruptError.
        """
        with self._locked():
            journal = self._recover_locked()
        if idempotency_key in journal.dangling:
            raise ReceiptIndeterminateError(instance_id=self._instance_id,
                                            idempotency_key=idempotency_key)
        return journal.by_key.get(idempotency_key)

    def receipts(self) -> list[Receipt]:
        """All committed receipts in journal order (oldest first)."""
        with self._locked():
            journal = self._recover_locked()
        return list(journal.committed)

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """The fingerprint after applying ``action`` to the current content; changes nothing.

        Raises:
            The same validation errors as :meth:`execute`.
        """
        change = self._parse(action)
        content = self._fetch(change, blobs)
        with self._locked():
            self._recover_locked()
            self._check_target(change)
            entries = self._scan()
        if content is not None:
            entries[change.path] = {"sha256": hashlib.sha256(content).hexdigest(),
                                    "executable": change.executable}
        else:
            entries.pop(change.path, None)
        return self._fingerprint(entries)

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """Git-style unified diff of what ``action`` would change; changes nothing.

        Binary content (a NUL byte or invalid UTF-8) shows as ``Binary files ... differ``.

        Raises:
            The same validation errors as :meth:`execute`.
        """
        change = self._parse(action)
        content = self._fetch(change, blobs)
        with self._locked():
            self._recover_locked()
            pre = self._check_target(change)
            old = self._read_file(change.path) if pre is not None else None
        old_exec = bool(pre and pre.get("executable"))
        return _unified_diff(change.path, old, old_exec, content, change.executable)

    # --- parsing and target checks --------------------------------------------------------

    def _parse(self, action: Action) -> FileChange:
        change = parse_file_action(action, reserved=(JOURNAL_DIR,))
        if any(part.startswith(TMP_PREFIX) for part in change.path.split("/")):
            raise PathEscapeError("names starting with the adapter's temp prefix are reserved",
                                  path=change.path)
        return change

    @staticmethod
    def _fetch(change: FileChange, blobs: BlobSource) -> bytes | None:
        if change.content is None:
            return None
        return fetch_blob(blobs, change.content, path=change.path)

    def _open_dir(self, parts: list[str], *, create: bool) -> int | None:
        """Open ``root/parts`` as a directory fd without following symlinks.

        Returns None when a component is missing and ``create`` is False.

        Raises:
            PathEscapeError: a component is a symlink.
            PreconditionFailedError: a component is not a directory.
            ConcurrentWriteError: a component changed between the check and the open.
        """
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for i, name in enumerate(parts):
                where = "/".join(parts[: i + 1])
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(name, 0o755, dir_fd=fd)
                    os.fsync(fd)
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    raise PathEscapeError("a directory on the path is a symlink", path=where)
                if not stat.S_ISDIR(st.st_mode):
                    raise PreconditionFailedError("a non-directory is in the way of the path",
                                                  path=where)
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    raise ConcurrentWriteError("a directory on the path changed while being opened",
                                               path=where) from None
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _check_target(self, change: FileChange) -> Entry | None:
        """The target's current entry (None when absent), after checking the write can apply.

        Raises:
            PathEscapeError: a symlink on the path or at the target.
            PreconditionFailedError: a file in the way, the target is a directory or special
                file, or a delete of a file that does not exist.
        """
        parts = change.path.split("/")
        dir_fd = self._open_dir(parts[:-1], create=False)
        pre: Entry | None = None
        if dir_fd is not None:
            try:
                pre = _entry_at(dir_fd, parts[-1])
            finally:
                os.close(dir_fd)
        if pre is not None and "symlink" in pre:
            raise PathEscapeError("the target is a symlink; links are never written through or "
                                  "replaced", path=change.path)
        if pre is not None and "sha256" not in pre:
            raise PreconditionFailedError("the target is not a regular file", path=change.path)
        if change.op == "delete" and pre is None:
            raise PreconditionFailedError("nothing to delete: the file does not exist",
                                          path=change.path)
        return pre

    def _current_entry(self, path: str) -> Entry | None:
        """Like :meth:`_check_target` but for recovery: never raises for odd paths."""
        parts = path.split("/")
        try:
            dir_fd = self._open_dir(parts[:-1], create=False)
        except (PathEscapeError, PreconditionFailedError, ConcurrentWriteError):
            return _UNREADABLE
        if dir_fd is None:
            return None
        try:
            return _entry_at(dir_fd, parts[-1])
        finally:
            os.close(dir_fd)

    def _read_file(self, path: str) -> bytes:
        parts = path.split("/")
        dir_fd = self._open_dir(parts[:-1], create=False)
        if dir_fd is None:
            return b""
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    # --- the write ------------------------------------------------------------------------

    def _apply(self, change: FileChange, content: bytes | None, pre: Entry | None,
               journal: _Journal, *, idempotency_key: str, intent_digest: str,
               fencing_token: int, approval_digest: str | None) -> Receipt:
        parts = change.path.split("/")
        tmp_name = TMP_PREFIX + uuid.uuid4().hex if content is not None else None
        post: Entry | None = None
        if content is not None:
            post = {"sha256": hashlib.sha256(content).hexdigest(), "executable": change.executable}
        prepared = {
            "type": "prepared",
            "key": idempotency_key,
            "intent_digest": intent_digest,
            "fencing_token": fencing_token,
            "approval_digest": approval_digest,
            "op": change.op,
            "path": change.path,
            "content": change.content,
            "executable": change.executable,
            "tmp": "/".join([*parts[:-1], tmp_name]) if tmp_name else None,
            "pre": pre,
            "post": post,
            "at": _now().isoformat(),
        }
        self._append(prepared)
        crash_point(CP_AFTER_PREPARE)
        try:
            dir_fd = self._open_dir(parts[:-1], create=content is not None)
            if dir_fd is None:  # the parent vanished since _check_target; out-of-band change
                raise ConcurrentWriteError("the target's directory disappeared", path=change.path)
            try:
                if content is not None and tmp_name is not None:
                    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
                    try:
                        _write_all(fd, content)
                        # fchmod, not the open mode: the umask must not decide the executable bit.
                        os.fchmod(fd, 0o755 if change.executable else 0o644)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                    crash_point(CP_BEFORE_RENAME)
                    os.rename(tmp_name, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                else:
                    crash_point(CP_BEFORE_RENAME)
                    os.unlink(parts[-1], dir_fd=dir_fd)
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except Exception:
            # Settle our own prepared record now (rolled back if the target is unchanged) so a
            # failed call does not leave the workspace blocked behind it.
            self._recover_locked()
            raise
        crash_point(CP_AFTER_RENAME)
        receipt = self._make_receipt(prepared, number=len(journal.committed) + 1,
                                     committed_at=_now(), recovered=False)
        self._append({"type": "committed", "key": idempotency_key,
                      "receipt": receipt.model_dump(mode="json")})
        crash_point(CP_AFTER_WRITE)
        return receipt

    def _make_receipt(self, prepared: dict[str, Any], *, number: int, committed_at: datetime,
                      recovered: bool) -> Receipt:
        pre = prepared["pre"]
        result: dict[str, Any] = {
            "op": prepared["op"],
            "path": prepared["path"],
            "content": prepared["content"],
            "executable": prepared["executable"],
            "previous": ("sha256:" + pre["sha256"]) if pre else None,
        }
        if recovered:
            result["recovered"] = True
        body = {
            "namespace": self.namespace,
            "adapter_version": ADAPTER_VERSION,
            "receipt_id": f"r{number}",
            "idempotency_key": prepared["key"],
            "intent_digest": prepared["intent_digest"],
            "result": result,
            "environment_version_after": f"w{number}",
            "fencing_token": prepared["fencing_token"],
            "committed_at": committed_at.isoformat(),
            "approval_digest": prepared["approval_digest"],
            "business_object": prepared["path"],
        }
        # Parse from canonical JSON, exactly as a later lookup will: the returned receipt and the
        # stored one are then equal field for field.
        return receipt_from_json(canonical_json(body), where=f"{JOURNAL_DIR}/journal.jsonl")

    # --- journal, fence, identity ---------------------------------------------------------

    @property
    def _journal_path(self) -> Path:
        return self._meta / "journal.jsonl"

    def _append(self, record: dict[str, Any]) -> None:
        line = canonical_json(record) + b"\n"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self._journal_path, flags, 0o644)
        try:
            _write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _corrupt(self, message: str, **context: Any) -> AdapterStoreCorruptError:
        return AdapterStoreCorruptError(message, instance_id=self._instance_id, **context)

    def _read_journal(self) -> tuple[list[dict[str, Any]], int | None]:
        """Parsed records and, if the last line is torn, the byte offset to truncate at."""
        try:
            data = self._journal_path.read_bytes()
        except FileNotFoundError:
            raise self._corrupt("the receipt journal is missing") from None
        lines = data.split(b"\n")
        tail = lines.pop()
        torn = len(data) - len(tail) if tail else None
        records = []
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError:
                raise self._corrupt("a journal line is not JSON", line=number) from None
            if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                raise self._corrupt("a journal line is not a record", line=number)
            records.append(record)
        return records, torn

    def _replay(self, records: list[dict[str, Any]]) -> _Journal:
        journal = _Journal()
        for number, record in enumerate(records, 1):
            kind, key = record.get("type"), record["key"]
            if kind == "prepared":
                token = record.get("fencing_token")
                if key in journal.by_key or key in journal.dangling or not isinstance(token, int):
                    raise self._corrupt("prepared record repeats a key or lacks a token",
                                        line=number)
                journal.dangling[key] = record
                journal.max_token = max(journal.max_token, token)
            elif kind == "committed":
                if journal.dangling.pop(key, None) is None:
                    raise self._corrupt("committed record without a prepared one", line=number)
                receipt = receipt_from_json(canonical_json(record.get("receipt")),
                                            where=f"journal line {number}")
                if receipt.idempotency_key != key:
                    raise self._corrupt("committed receipt carries another key", line=number)
                journal.committed.append(receipt)
                journal.by_key[key] = receipt
            elif kind == "aborted":
                if journal.dangling.pop(key, None) is None:
                    raise self._corrupt("aborted record without a prepared one", line=number)
            else:
                raise self._corrupt("unknown journal record type", line=number)
        return journal

    def _recover_locked(self) -> _Journal:
        """Replay the journal and settle interrupted writes (see the module docstring)."""
        records, torn = self._read_journal()
        if torn is not None:
            # Killed mid-append: the partial line was never acknowledged to anyone.
            os.truncate(self._journal_path, torn)
            fd = os.open(self._journal_path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        journal = self._replay(records)
        for key, prepared in list(journal.dangling.items()):
            self._remove_tmp(prepared)
            current = self._current_entry(prepared["path"])
            if current == prepared["post"]:
                receipt = self._make_receipt(prepared, number=len(journal.committed) + 1,
                                             committed_at=_now(), recovered=True)
                self._append({"type": "committed", "key": key,
                              "receipt": receipt.model_dump(mode="json")})
                journal.committed.append(receipt)
                journal.by_key[key] = receipt
                del journal.dangling[key]
            elif current == prepared["pre"]:
                self._append({"type": "aborted", "key": key, "at": _now().isoformat(),
                              "reason": "interrupted before the commit point; target unchanged"})
                del journal.dangling[key]
        return journal

    def _remove_tmp(self, prepared: dict[str, Any]) -> None:
        tmp = prepared.get("tmp")
        if not isinstance(tmp, str):
            return
        parts = tmp.split("/")
        try:
            dir_fd = self._open_dir(parts[:-1], create=False)
        except (PathEscapeError, PreconditionFailedError, ConcurrentWriteError):
            return
        if dir_fd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(parts[-1], dir_fd=dir_fd)
                os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _read_fence(self) -> int:
        try:
            text = (self._meta / "fence").read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except UnicodeDecodeError:
            raise self._corrupt("the fence file is not a number") from None
        if not text.isdigit():
            raise self._corrupt("the fence file is not a number")
        return int(text)

    def _check_fence(self, journal: _Journal, token: int, key: str) -> None:
        newest = max(journal.max_token, self._read_fence())
        if token < newest:
            raise FencingTokenError(instance_id=self._instance_id, idempotency_key=key,
                                    fencing_token=token, newest_seen=newest)

    def _raise_fence(self, token: int) -> None:
        if token > self._read_fence():
            self._atomic_meta_write("fence", f"{token}\n".encode("ascii"))

    def _atomic_meta_write(self, name: str, data: bytes) -> None:
        tmp = self._meta / f"{name}.tmp-{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self._meta / name)
        self._fsync_dir(self._meta)

    def _load_or_create_instance_id(self) -> str:
        path = self._meta / "instance-id"
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            text = str(uuid.uuid4())
            self._atomic_meta_write("instance-id", (text + "\n").encode("ascii"))
            return text
        except UnicodeDecodeError:
            text = ""
        if not text or len(text) > 200 or any(ch.isspace() for ch in text):
            raise AdapterStoreCorruptError("the workspace instance id file is unreadable",
                                           target=str(self.root))
        return text

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive_lock(self._meta / "lock", timeout=self._lock_timeout, target=str(self.root)):
            yield

    # --- content scan ---------------------------------------------------------------------

    def _scan(self) -> dict[str, Entry]:
        entries: dict[str, Entry] = {}
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._scan_dir(root_fd, "", entries)
        finally:
            os.close(root_fd)
        return entries

    def _scan_dir(self, dir_fd: int, prefix: str, entries: dict[str, Entry]) -> None:
        with os.scandir(dir_fd) as it:
            names = sorted(entry.name for entry in it)
        for name in names:
            if not prefix and name == JOURNAL_DIR:
                continue
            rel = prefix + _display_name(name)
            entry = _entry_at(dir_fd, name)
            if entry is None:  # vanished while scanning
                continue
            if "directory" in entry:
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                except OSError:
                    entries[rel] = _UNREADABLE
                    continue
                try:
                    self._scan_dir(child, rel + "/", entries)
                finally:
                    os.close(child)
            else:
                entries[rel] = entry

    @staticmethod
    def _fingerprint(entries: dict[str, Entry]) -> str:
        return digest(DigestKind.ENVIRONMENT, {"files": entries})

    @staticmethod
    def _listing(entries: dict[str, Entry]) -> bytes:
        lines = []
        for path in sorted(entries):
            entry = entries[path]
            if "sha256" in entry:
                lines.append(f"{_mode_text(entry['executable'])} {entry['sha256']} {path}\n")
            elif "symlink" in entry:
                lines.append(f"120000 -> {entry['symlink']} {path}\n")
            else:
                lines.append(f"other {json.dumps(entry, sort_keys=True)} {path}\n")
        out = bytearray()
        for index, line in enumerate(lines):
            data = line.encode("utf-8")
            if len(out) + len(data) > MAX_LISTING_BYTES:
                out += f"... truncated: {len(lines) - index} more entries\n".encode()
                break
            out += data
        return bytes(out)


def _unified_diff(path: str, old: bytes | None, old_exec: bool, new: bytes | None,
                  new_exec: bool) -> str:
    """A git-flavoured unified diff of one file (``old``/``new`` None = absent)."""
    a = f"a/{path}" if old is not None else "/dev/null"
    b = f"b/{path}" if new is not None else "/dev/null"
    out = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        out.append(f"new file mode {_mode_text(new_exec)}\n")
    elif new is None:
        out.append(f"deleted file mode {_mode_text(old_exec)}\n")
    elif old_exec != new_exec:
        out.append(f"old mode {_mode_text(old_exec)}\nnew mode {_mode_text(new_exec)}\n")
    if old == new:
        return "".join(out) if len(out) > 1 else ""
    texts = []
    for data in (old, new):
        if data is None:
            texts.append([])
            continue
        if b"\0" in data:
            texts = None
            break
        try:
            texts.append(data.decode("utf-8").splitlines(keepends=True))
        except UnicodeDecodeError:
            texts = None
            break
    if texts is None:
        out.append(f"Binary files {a} and {b} differ\n")
        return "".join(out)
    for line in difflib.unified_diff(texts[0], texts[1], fromfile=a, tofile=b):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
