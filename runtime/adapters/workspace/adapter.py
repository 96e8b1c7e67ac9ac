"""Workspace adapter: a plain directory as an environment (DESIGN.md sections 4 and 5).

Layout. Everything the adapter owns lives in ``<root>/.ratchet/``:

* ``instance-id``   the workspace's identity, a random uuid written once;
* ``journal.jsonl`` the two-phase receipt journal (:mod:`runtime.adapters.workspace.journal`);
* ``fence``         the newest fencing token accepted (:mod:`runtime.adapters.fence`);
* ``lock``          an ``fcntl.flock`` lock file: two processes never interleave on one workspace.

Nothing under ``.ratchet/`` counts towards the fingerprint and no action may write there.

Version and fingerprint. ``version`` is ``"w<N>"`` where N is the number of committed receipts in
the journal: it only moves through the adapter. The fingerprint covers the content
(:mod:`runtime.adapters.workspace.scan`), so an out-of-band edit changes the fingerprint but not
the version.

A write is journalled ``prepared``, then the temp file is written in the target's directory,
fsync'd and renamed over the target (or the target unlinked) and the directory fsync'd -- the
commit point of the effect -- then journalled ``committed`` with the receipt. Files are reached
without following symlinks (:mod:`runtime.adapters.workspace.files`).

Every public call first settles writes a crash interrupted (rolled forward, rolled back, or left
for a human; see :mod:`runtime.adapters.workspace.journal`).

This module imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from runtime.adapters.actions import FileChange, check_call, parse_file_action
from runtime.adapters.base import BlobSource, Observation
from runtime.adapters.blobs import fetch_blob
from runtime.adapters.deadline import CommitDeadline
from runtime.adapters.durable_files import atomic_replace, fsync_dir, write_all
from runtime.adapters.fence import fence_raise, fence_read
from runtime.adapters.file_diff import unified_diff
from runtime.adapters.locking import exclusive_lock
from runtime.adapters.workspace.files import (
    Entry,
    check_target,
    open_dir,
    read_file,
)
from runtime.adapters.workspace.journal import JournalState, ReceiptJournal
from runtime.adapters.workspace.scan import (
    workspace_fingerprint,
    workspace_listing,
    workspace_scan,
)
from runtime.core.checkpoint import Action, Receipt
from runtime.core.crashpoints import crash_point, register
from runtime.errors import (
    AdapterStoreCorruptError,
    AdapterTargetError,
    ConcurrentWriteError,
    FencingTokenError,
    PathEscapeError,
    ReceiptIndeterminateError,
)

KIND = "workspace"
ADAPTER_VERSION = "ratchet-workspace/1"
JOURNAL_DIR = ".ratchet"
TMP_PREFIX = ".ratchet-tmp-"
LOCK_TIMEOUT_SECONDS = 30.0

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
    accepts_not_after = True

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
            fsync_dir(self.root)
            meta_st = os.lstat(self._meta)
        if not stat.S_ISDIR(meta_st.st_mode):
            raise AdapterTargetError(f"{JOURNAL_DIR} in the workspace is not a directory",
                                     target=str(self.root))
        with self._locked():
            self._instance_id = self._load_or_create_instance_id()
            self.namespace = f"{KIND}:{self._instance_id}"
            self._journal = ReceiptJournal(self._meta / "journal.jsonl",
                                           instance_id=self._instance_id,
                                           namespace=self.namespace,
                                           adapter_version=ADAPTER_VERSION)
            self._journal.ensure_exists()

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
            entries = workspace_scan(self.root, skip=JOURNAL_DIR)
        return Observation(
            instance_id=self._instance_id,
            version=f"w{journal.count}",
            state_fingerprint=workspace_fingerprint(entries),
            kind=KIND,
            attachments={"listing.txt": workspace_listing(entries)},
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
        not_after: CommitDeadline | None = None,
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
            not_after: the approval's deadline, checked before the commit point (DESIGN.md section 5.5).

        Returns:
            The new receipt, or the stored one unchanged when the key already has one (even
            for another intent digest: DESIGN.md section 6 makes that the engine's conflict).

        Raises:
            FencingTokenError, CommitDeadlinePassedError: a stale token, a passed deadline; nothing written.
            ReceiptIndeterminateError: an earlier interrupted write is unresolved.
            InvalidActionError, PathEscapeError, BlobDigestMismatchError, BlobUnavailableError,
            PreconditionFailedError, AdapterBusyError (the lock was not obtained in time): nothing written.
        """
        check_call(idempotency_key=idempotency_key, intent_digest=intent_digest, fencing_token=fencing_token,
                   approval_digest=approval_digest, not_after=not_after)
        with self._locked():
            journal = self._recover_locked()
            self._check_fence(journal, fencing_token, idempotency_key)
            existing = journal.receipt(idempotency_key)
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
            pre = check_target(self.root, change)
            self._raise_fence(fencing_token)
            crash_point(CP_BEFORE_WRITE)
            return self._apply(change, content, pre, journal, idempotency_key=idempotency_key, not_after=not_after,
                               intent_digest=intent_digest, fencing_token=fencing_token,
                               approval_digest=approval_digest)

    def fence_advance(self, fencing_token: int) -> None:
        """Persist ``fencing_token`` as the newest seen, writing nothing else (DESIGN.md section 4.6).

        A new lease holder calls this before its look-up by key, so an older holder that is
        still on its way to :meth:`execute` is refused there.

        Raises:
            FencingTokenError: ``fencing_token`` is below the newest seen.
            AdapterBusyError, AdapterStoreCorruptError.
        """
        if isinstance(fencing_token, bool) or not isinstance(fencing_token, int) or fencing_token < 0:
            raise FencingTokenError("fencing token must be an integer >= 0", instance_id=self._instance_id)
        with self._locked():
            journal = self._recover_locked()
            self._check_fence(journal, fencing_token, "")
            self._raise_fence(fencing_token)

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
        return journal.receipt(idempotency_key)

    def receipts(self) -> list[Receipt]:
        """All committed receipts, oldest first, from a full read of the journal (the audit)."""
        with self._locked():
            journal = self._recover_locked(full=True)
        return journal.receipts()

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """The fingerprint after applying ``action`` to the current content; changes nothing.

        Raises:
            The same validation errors as :meth:`execute`.
        """
        change = self._parse(action)
        content = self._fetch(change, blobs)
        with self._locked():
            self._recover_locked()
            check_target(self.root, change)
            entries = workspace_scan(self.root, skip=JOURNAL_DIR)
        if content is not None:
            entries[change.path] = {"sha256": hashlib.sha256(content).hexdigest(),
                                    "executable": change.executable}
        else:
            entries.pop(change.path, None)
        return workspace_fingerprint(entries)

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
            pre = check_target(self.root, change)
            old = read_file(self.root, change.path) if pre is not None else None
        old_exec = bool(pre and pre.get("executable"))
        return unified_diff(change.path, old, old_exec, content, change.executable)

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

    # --- the write ------------------------------------------------------------------------

    def _apply(self, change: FileChange, content: bytes | None, pre: Entry | None, journal: JournalState, *,
               idempotency_key: str, intent_digest: str, fencing_token: int, approval_digest: str | None,
               not_after: CommitDeadline | None) -> Receipt:
        parts = change.path.split("/")
        tmp_name = TMP_PREFIX + uuid.uuid4().hex if content is not None else None
        post: Entry | None = None if content is None else {
            "sha256": hashlib.sha256(content).hexdigest(), "executable": change.executable}
        prepared = self._journal.prepare(
            change, idempotency_key=idempotency_key, intent_digest=intent_digest,
            fencing_token=fencing_token, approval_digest=approval_digest,
            tmp="/".join([*parts[:-1], tmp_name]) if tmp_name else None, pre=pre, post=post)
        crash_point(CP_AFTER_PREPARE)
        try:
            dir_fd = open_dir(self.root, parts[:-1], create=content is not None)
            if dir_fd is None:  # the parent vanished since check_target; out-of-band change
                raise ConcurrentWriteError("the target's directory disappeared", path=change.path)
            try:
                if content is not None and tmp_name is not None:
                    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
                    try:
                        write_all(fd, content)
                        # fchmod, not the open mode: the umask must not decide the executable bit.
                        os.fchmod(fd, 0o755 if change.executable else 0o644)
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                crash_point(CP_BEFORE_RENAME)
                if not_after is not None:  # the commit point is next: the approval must still hold
                    not_after.check(instance_id=self._instance_id, idempotency_key=idempotency_key)
                if tmp_name is not None:
                    os.rename(tmp_name, parts[-1], src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                else:
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
        stamp = not_after.now() if not_after is not None else None  # after the rename: never too early
        receipt = self._journal.commit(journal, prepared, recovered=False, committed_at=stamp)
        crash_point(CP_AFTER_WRITE)
        return receipt

    # --- recovery, fence, identity -------------------------------------------------------

    def _recover_locked(self, *, full: bool = False) -> JournalState:
        return self._journal.recover(self.root, full=full)

    def _check_fence(self, journal: JournalState, token: int, key: str) -> None:
        newest = max(journal.max_token, fence_read(self._meta / "fence", label="the fence file",
                                                   instance_id=self._instance_id))
        if token < newest:
            raise FencingTokenError(instance_id=self._instance_id, idempotency_key=key,
                                    fencing_token=token, newest_seen=newest)

    def _raise_fence(self, token: int) -> None:
        fence_raise(self._meta / "fence", token, label="the fence file",
                    instance_id=self._instance_id)

    def _load_or_create_instance_id(self) -> str:
        path = self._meta / "instance-id"
        try:
            text = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            text = str(uuid.uuid4())
            atomic_replace(self._meta, "instance-id", (text + "\n").encode("ascii"))
            return text
        except UnicodeDecodeError:
            text = ""
        if not text or len(text) > 200 or any(ch.isspace() for ch in text):
            raise AdapterStoreCorruptError("the workspace instance id file is unreadable",
                                           target=str(self.root))
        return text

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive_lock(self._meta / "lock", timeout=self._lock_timeout, target=str(self.root)):
            yield
