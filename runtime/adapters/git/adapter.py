"""Git adapter: a non-bare repository as an environment (DESIGN.md sections 4 and 5).

The repository's own history is the receipt store: every write lands as exactly one commit
carrying the ``Idempotency-Key``, ``Intent-Digest``, ``Fencing-Token`` (and ``Approval-Digest``,
``Committed-At``) trailers after the planned message, byte for byte
(:mod:`runtime.adapters.git.receipts`); "each key has exactly one effect" is checked by counting
the commits that carry it. What a write may hold -- any message bytes, identities and dates,
files, executables, symlinks, gitlinks, deletes, nothing at all -- is in
:mod:`runtime.adapters.git.commit_params`. The instance id is ``ratchet.instance-id`` in the
repository's own config (a clone is another instance), and so is its base, ``ratchet.base-commit``:
HEAD when the adapter first opened the repository; receipts and fencing tokens are read only
from commits above it (:func:`runtime.adapters.git.state.instance_load_or_create`). The version
is the HEAD sha, and the fingerprint covers HEAD's tree, every uncommitted edit and every
foreign git lock (:mod:`runtime.adapters.git.state`).

Execute, under an ``fcntl.flock`` on ``.git/ratchet.lock`` that every git child inherits
(:mod:`runtime.adapters.git.process`):

1. an interrupted earlier operation is finished or dropped (:mod:`runtime.adapters.git.recovery`);
2. fencing: the newest token seen is ``max(Fencing-Token trailers above the base,
   .git/ratchet-fence)``; an older token raises :class:`FencingTokenError` before anything else;
3. idempotency: a commit already carrying the key is returned as the receipt, nothing written
   (looked up in the key index, :mod:`runtime.adapters.git.key_index`, which reads only the
   commits HEAD gained since its last call);
4. the working tree must be clean and free of foreign git locks (drift is never committed or
   clobbered by a write it did not come from);
5. the blobs, the tree and the commit object are written (:mod:`runtime.adapters.git.trees`);
6. the operation journal ``.git/ratchet-sync.json`` is written, then ``git update-ref HEAD <new>
   <old>``: compare-and-set on the ref, **the commit point**. Losing the race raises
   :class:`ConcurrentWriteError` and nothing is committed;
7. the index and working tree are brought to the new tree (``read-tree -m -u old new``) and the
   journal is removed.

Crash ordering: before step 6's ref update nothing visible changed (unreferenced objects are
garbage, not state). After it, the receipt exists, so ``lookup_receipt`` finds it even if the
process died before or inside the checkout. Every later call (observe, lookup, execute) runs
recovery first, so ``observe()`` then shows the clean post-state that ``predict_post_state``
promised -- also after a SIGKILL inside ``update-ref`` or ``read-tree`` that left ``HEAD.lock``,
``index.lock`` or a half-written working tree. A lock or edit from outside Ratchet is not
touched: it shows as drift and the run freezes for a human.

Reads -- HEAD and its tree, ancestry for the key index, tree entries for the path checks -- and
the writes of objects (blobs, trees, the commit: garbage until the ref names them) are in-process
with libgit2 (``pygit2``); every write of a ref, the index, the working tree or the config is
still a git child under the journal above, so a SIGKILL anywhere is recovered the same way.

``predict_post_state`` and ``dry_run_diff`` build the same tree with a scratch object directory
(``GIT_OBJECT_DIRECTORY`` plus the real one as an alternate), so they write nothing to the
repository. Only the instance id and base are cached (neither ever changes): another process
may commit between two calls.

This module imports nothing from Django.
Over 400 lines: a third of it is this walk through the write protocol, kept beside the code.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pygit2

from runtime.adapters.actions import check_call
from runtime.adapters.base import BlobSource, Observation
from runtime.adapters.blobs import fetch_blob
from runtime.adapters.deadline import CommitDeadline
from runtime.adapters.fence import fence_raise
from runtime.adapters.git.commit_params import CommitPlan, Identity, parse_action
from runtime.adapters.git.key_index import KeyIndex
from runtime.adapters.git.process import GitProcess
from runtime.adapters.git.receipts import (
    ADAPTER_VERSION,
    LoggedCommit,
    check_fence,
    commit_info,
    message_with_trailers,
    receipt_of,
    written_commit,
)
from runtime.adapters.git.recovery import (
    LOCK_FILE,
    commit_operation,
    journal_begin,
    journal_end,
    journal_read,
    recover,
)
from runtime.adapters.git.state import (
    LOCK_ENTRY,
    dirty_entries,
    fingerprint,
    instance_load_or_create,
)
from runtime.adapters.git.status import WorktreeStatus
from runtime.adapters.git.trees import build_tree, check_paths, scratch_objects, write_commit
from runtime.adapters.locking import exclusive_lock
from runtime.core.checkpoint import Action, Receipt
from runtime.core.crashpoints import crash_point, register
from runtime.errors import (
    AdapterCommandError,
    AdapterTargetError,
    ConcurrentWriteError,
    FencingTokenError,
    PreconditionFailedError,
)

KIND = "git"
COMMITTER_NAME = "Ratchet"
COMMITTER_EMAIL = "ratchet@localhost"
FENCE_FILE = "ratchet-fence"

LOCK_TIMEOUT_SECONDS = 30.0
MAX_ATTACHMENT_BYTES = 64 * 1024

CP_BEFORE_WRITE = register(
    "git.before_write",
    "git: action validated, blobs checked, fence persisted; no object written, HEAD unchanged",
)
CP_AFTER_OBJECTS = register(
    "git.after_objects",
    "git: blobs, tree and commit object written (unreferenced); no journal, HEAD unchanged",
)
CP_BEFORE_REF_UPDATE = register(
    "git.before_ref_update",
    "git: commit object and sync marker written; HEAD not moved (nothing committed)",
)
CP_AFTER_REF_UPDATE = register(
    "git.after_ref_update",
    "git: HEAD moved to the new commit (the commit point); index and working tree still old",
)
CP_AFTER_WRITE = register(
    "git.after_write",
    "git: index and working tree at the new commit, marker removed; the call has not returned",
)


class GitAdapter:
    """A non-bare git repository as an environment; see the module docstring.

    Args:
        target: the top directory of a non-bare repository's main working tree, with at least
            one commit.
        git: the ``git`` executable to run (default: ``git`` on ``PATH``; 2.39 or newer).
        lock_timeout: seconds to wait for ``.git/ratchet.lock`` before :class:`AdapterBusyError`.

    Raises:
        AdapterTargetError: not a directory, not a repository, a bare repository, a
            subdirectory or linked worktree rather than the main top level, or no commits.
        AdapterCommandError: ``git`` is missing or fails.
    """

    kind = KIND
    accepts_not_after = True
    adapter_version = ADAPTER_VERSION

    def __init__(self, target: str | Path, *, git: str = "git",
                 lock_timeout: float = LOCK_TIMEOUT_SECONDS) -> None:
        path = Path(target)
        if not path.is_dir():
            raise AdapterTargetError("git target is not a directory", target=str(path))
        self.root = path.resolve()
        self._git = GitProcess(self.root, git=git)
        self._lock_timeout = lock_timeout
        probe = self._git.run(["rev-parse", "--is-bare-repository", "--show-toplevel",
                               "--absolute-git-dir", "--git-common-dir", "--git-path", "objects"],
                              check=False)
        lines = probe.stdout.decode("utf-8", "surrogateescape").splitlines()
        if probe.returncode != 0 or len(lines) != 5:
            raise AdapterTargetError("target is not inside a git repository", target=str(self.root))
        bare, top, git_dir, common_dir, objects = lines
        if bare != "false":
            raise AdapterTargetError("bare repositories have no working tree",
                                     target=str(self.root))
        if Path(top).resolve() != self.root:
            raise AdapterTargetError("target must be the top of the working tree",
                                     target=str(self.root))
        self._git_dir = Path(git_dir)
        if (self.root / common_dir).resolve() != self._git_dir.resolve():
            raise AdapterTargetError("linked worktrees are not supported", target=str(self.root))
        self._objects_dir = (self.root / objects).resolve()
        self._status = WorktreeStatus(git=self._git, git_dir=self._git_dir)
        try:
            # Reads (HEAD, ancestry, tree entries) and object writes; refs, the index, the
            # working tree and the config are written by git children.
            self._repo = pygit2.Repository(str(self._git_dir))
        except pygit2.GitError as exc:
            raise AdapterCommandError(f"libgit2 cannot open the repository: {exc}",
                                      target=str(self.root)) from None
        head = self._git.run(["rev-parse", "--verify", "-q", "HEAD^{commit}"], check=False)
        if head.returncode != 0:
            raise AdapterTargetError("repository has no commits; make an initial commit",
                                     target=str(self.root))
        with self._locked():
            self._recover_locked()
            self._instance_id, base = instance_load_or_create(self._git, self._git_dir)
        self._index = KeyIndex(base=base, instance_id=self._instance_id)
        self.namespace = f"{KIND}:{self._instance_id}"

    # --- public API -----------------------------------------------------------------------

    def instance_id(self) -> str:
        """The repository identity from its config key ``ratchet.instance-id``."""
        return self._instance_id

    def observe(self) -> Observation:
        """Finish any interrupted write, then return instance, HEAD, fingerprint and evidence.

        Attachment: ``status.txt`` (one ``XY path`` line per uncommitted entry or foreign git
        lock, cut at 64 KiB; empty, so one shared attachment, while the tree is clean). HEAD is
        not copied into an attachment: the checkpoint records it as the version, git holds the
        commit (and with it the tree), and every receipt names both (DESIGN.md section 4.14).

        Raises:
            AdapterBusyError, AdapterCommandError.
        """
        with self._locked():
            self._recover_locked()
            head, tree = self._head()
            dirty = self._dirty_entries()
        status = "".join(f"{e['xy']} {e['path']}\n" for e in dirty).encode("utf-8")
        if len(status) > MAX_ATTACHMENT_BYTES:
            status = status[:MAX_ATTACHMENT_BYTES] + b"\n... truncated\n"
        return Observation(
            instance_id=self._instance_id,
            version=head,
            state_fingerprint=fingerprint(tree, dirty),
            kind=KIND,
            attachments={"status.txt": status},
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
        """Land ``action`` as one commit carrying the key, intent and fencing trailers.

        Args:
            action: ``write_file`` / ``delete_file`` (one path), or ``commit`` (see
                :mod:`runtime.adapters.git.commit_params`), committed with the planned
                message, author and (when given) committer, byte for byte.
            idempotency_key: 1-200 printable characters, derived before the write.
            intent_digest: ``sha256:`` digest of the action.
            fencing_token: the caller's lease version (>= 0).
            blobs: ``digest -> bytes`` for file contents and link targets.
            approval_digest: bound into the commit (``Approval-Digest`` trailer) when given.
            not_after: the approval's deadline (DESIGN.md section 5.5): checked before the
                commit object is made (its ``Committed-At`` trailer is that check's time on the
                deadline's clock, rounded up to a whole second) and again immediately before the
                ``update-ref`` that commits it.

        Returns:
            The receipt read back from the commit; for a key already in history, that commit's
            receipt unchanged, with nothing written.

        Raises:
            FencingTokenError: the token is older than the newest seen; nothing written.
            CommitDeadlinePassedError: ``not_after`` passed before ``update-ref``; HEAD is
                unchanged (the unreferenced objects are git's garbage to collect).
            DuplicateReceiptError: the key is on more than one commit already.
            InvalidActionError, PathEscapeError, BlobDigestMismatchError,
            BlobUnavailableError, PreconditionFailedError (dirty working tree or a foreign git
            lock, file in the way, nothing to delete): nothing written.
            ConcurrentWriteError: HEAD moved under the compare-and-set; nothing committed.
            AdapterBusyError, AdapterCommandError, AdapterTimeoutError.
        """
        check_call(idempotency_key=idempotency_key, intent_digest=intent_digest,
                   fencing_token=fencing_token, approval_digest=approval_digest, not_after=not_after)
        with self._locked():
            self._recover_locked()
            self._index_refresh()
            self._check_fence(fencing_token, idempotency_key)
            existing = self._index.find(idempotency_key)
            if existing is not None:
                self._raise_fence(fencing_token)
                return self._receipt(existing)
            now = int(time.time())
            plan = parse_action(action, committer_default=self._ratchet_identity(now))
            contents = self._fetch(plan, blobs)
            head, tree = self._head()
            dirty = self._dirty_entries()
            if dirty:
                locks = [e["path"] for e in dirty if e["xy"] == LOCK_ENTRY]
                raise PreconditionFailedError(
                    f"a git lock file not made by Ratchet is present: {locks[0]}" if locks else
                    "the working tree has uncommitted changes; refusing to write over drift",
                    instance_id=self._instance_id, idempotency_key=idempotency_key)
            check_paths(self._git, self._repo, tree, plan)
            self._raise_fence(fencing_token)
            crash_point(CP_BEFORE_WRITE)
            new_tree = build_tree(self._repo, tree, plan.changes, contents)
            context = {"instance_id": self._instance_id, "idempotency_key": idempotency_key}
            stamp = not_after.check_whole_seconds(**context) if not_after is not None else now
            message = message_with_trailers(
                plan.message, idempotency_key=idempotency_key, intent_digest=intent_digest,
                fencing_token=fencing_token, approval_digest=approval_digest, committed_at=stamp)
            commit = write_commit(self._repo, tree=new_tree, parent=head, plan=plan,
                                  message=message)
            crash_point(CP_AFTER_OBJECTS)
            if not_after is not None:
                not_after.check(**context)  # the last moment before the commit point
            journal_begin(self._git_dir, commit_operation(
                self._git_dir, old=head, new=commit, old_tree=tree, new_tree=new_tree))
            crash_point(CP_BEFORE_REF_UPDATE)
            moved = self._git.run(["update-ref", "-m", f"ratchet: {idempotency_key}", "HEAD",
                                   commit, head], check=False)
            if moved.returncode != 0:
                # A failed update-ref rolls back its own lock files: nothing of ours is left.
                journal_end(self._git_dir)
                current, _ = self._head()
                if current != head:
                    raise ConcurrentWriteError(instance_id=self._instance_id,
                                               idempotency_key=idempotency_key,
                                               expected_head=head, actual_head=current)
                raise self._git.error(["update-ref"], moved)
            crash_point(CP_AFTER_REF_UPDATE)
            recover(self._git, self._git_dir, head=commit, fresh=True)
            crash_point(CP_AFTER_WRITE)
            made = (written_commit(self._repo, commit, instance_id=self._instance_id)
                    or commit_info(self._git, self._repo, commit, instance_id=self._instance_id))
            self._index.record(made)
            return self._receipt(made)

    def fence_advance(self, fencing_token: int) -> None:
        """Persist ``fencing_token`` as the newest seen, committing nothing (DESIGN.md section 4.6).

        A new lease holder calls this before its look-up by key, so an older holder that already
        passed its fence check is refused at its ``update-ref`` instead of landing a commit after
        the new holder looked the key up.

        Raises:
            FencingTokenError: ``fencing_token`` is not an integer >= 0, or is below the newest
                token seen (in ``.git/ratchet-fence`` or in a receipt trailer above the base).
            AdapterBusyError, AdapterCommandError, AdapterTimeoutError.
        """
        if isinstance(fencing_token, bool) or not isinstance(fencing_token, int) or fencing_token < 0:
            raise FencingTokenError("fencing token must be an integer >= 0", instance_id=self._instance_id)
        with self._locked():
            self._recover_locked()
            self._index_refresh()
            self._check_fence(fencing_token, "")
            self._raise_fence(fencing_token)

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The receipt of the one commit above the base in HEAD's history carrying the key, or None.

        Raises:
            DuplicateReceiptError: more than one commit carries the key.
            AdapterStoreCorruptError: that commit's trailers are malformed.
        """
        with self._locked():
            self._recover_locked()
            self._index_refresh()
            found = self._index.find(idempotency_key)
        return self._receipt(found) if found is not None else None

    def receipts(self) -> list[Receipt]:
        """Receipts of every commit above the base with an ``Idempotency-Key``, oldest first.

        Duplicates are listed, not hidden: the engine's audit counts them.

        Raises:
            AdapterStoreCorruptError: a commit with the key trailer has malformed trailers.
        """
        with self._locked():
            self._recover_locked()
            self._index_refresh()
            commits = self._index.commits()
        return [self._receipt(c) for c in commits]

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """Fingerprint after committing ``action`` on the current HEAD; writes nothing.

        Uncommitted entries are carried over as they are (``execute`` itself would refuse a
        dirty working tree).

        Raises:
            The same validation errors as :meth:`execute`.
        """
        plan = parse_action(action, committer_default=self._ratchet_identity(0))
        contents = self._fetch(plan, blobs)
        with self._locked():
            self._recover_locked()
            _, tree = self._head()
            check_paths(self._git, self._repo, tree, plan)
            dirty = self._dirty_entries()
            with scratch_objects(self._objects_dir) as (scratch, _env):
                new_tree = build_tree(scratch, tree, plan.changes, contents)
        return fingerprint(new_tree, dirty)

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """``git diff-tree -p`` between HEAD's tree and the tree ``action`` would commit.

        Raises:
            The same validation errors as :meth:`execute`.
        """
        plan = parse_action(action, committer_default=self._ratchet_identity(0))
        contents = self._fetch(plan, blobs)
        with self._locked():
            self._recover_locked()
            _, tree = self._head()
            check_paths(self._git, self._repo, tree, plan)
            with scratch_objects(self._objects_dir) as (scratch, env):
                new_tree = build_tree(scratch, tree, plan.changes, contents)
                diff = self._git.run(["diff-tree", "-r", "-p", "--no-color", "--no-ext-diff",
                                      "--no-textconv", "--no-renames", tree, new_tree], env=env)
        return diff.stdout.decode("utf-8", "replace")

    # --- helpers --------------------------------------------------------------------------

    @staticmethod
    def _ratchet_identity(epoch: int) -> Identity:
        # The committer date of Ratchet's own commits is the real commit time.
        return Identity(COMMITTER_NAME.encode(), COMMITTER_EMAIL.encode(), f"{epoch} +0000")

    @staticmethod
    def _fetch(plan: CommitPlan, blobs: BlobSource) -> dict[str, bytes]:
        return {c.content: fetch_blob(blobs, c.content, path=c.path)
                for c in plan.changes if c.content is not None}

    def _head(self) -> tuple[str, str]:
        """``(HEAD commit id, its tree id)``, read in-process (no git child)."""
        try:
            commit = self._repo.head.peel(pygit2.Commit)
        except (pygit2.GitError, KeyError) as exc:
            raise AdapterCommandError(f"cannot read HEAD: {exc}", target=str(self.root)) from None
        return str(commit.id), str(commit.tree_id)

    def _dirty_entries(self) -> list[dict[str, Any]]:
        return dirty_entries(self._status, self._git_dir)

    def _receipt(self, commit: LoggedCommit) -> Receipt:
        return receipt_of(commit, namespace=self.namespace, instance_id=self._instance_id)

    def _index_refresh(self) -> None:
        self._index.refresh(self._git, self._repo, self._head()[0])

    def _check_fence(self, token: int, key: str) -> None:
        check_fence(self._git_dir / FENCE_FILE, self._index.newest_token(), token, key=key,
                    instance_id=self._instance_id)

    def _raise_fence(self, token: int) -> None:
        fence_raise(self._git_dir / FENCE_FILE, token, label=f".git/{FENCE_FILE}",
                    instance_id=self._instance_id)

    def _recover_locked(self) -> None:
        """Finish or drop an interrupted operation (see :mod:`runtime.adapters.git.recovery`)."""
        if journal_read(self._git_dir)[0] is None:
            return
        head, _ = self._head()
        recover(self._git, self._git_dir, head=head)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive_lock(self._git_dir / LOCK_FILE, timeout=self._lock_timeout,
                            target=str(self.root)) as fd:
            self._git.lock_fd = fd
            try:
                yield
            finally:
                self._git.lock_fd = None
