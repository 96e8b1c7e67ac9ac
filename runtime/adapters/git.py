"""Git adapter: a non-bare repository as an environment (DESIGN.md sections 4 and 5).

The repository's own history is the receipt store. Every write lands as exactly one commit whose
message ends with the trailers::

    Idempotency-Key: <key>
    Intent-Digest: sha256:<hex>
    Fencing-Token: <n>
    Approval-Digest: sha256:<hex>      (only when the write was approved)

so a receipt is looked up by scanning the history reachable from HEAD for the key's trailer, and
"each key has exactly one effect" is checked by counting the commits that carry it.

Identity and state:

* instance id: ``ratchet.instance-id`` in the repository's own config (``.git/config``), a uuid
  created once. ``git clone`` does not copy it, so a clone is another instance;
* version: the HEAD commit sha (moves only by commits);
* fingerprint: typed digest (``DigestKind.ENVIRONMENT``) over ``{"tree": HEAD's tree sha,
  "dirty": sorted status entries}``, each entry ``{xy, path, content}`` with the sha256 of what
  is in the working tree, so any uncommitted edit -- staged, unstaged or untracked -- is drift,
  and two different uncommitted edits are different drift.

Execute, under an ``fcntl.flock`` on ``.git/ratchet.lock``:

1. fencing: the newest token seen is ``max(Fencing-Token trailers in history,
   .git/ratchet-fence)``; an older token raises :class:`FencingTokenError` before anything else;
2. idempotency: a commit already carrying the key is returned as the receipt, nothing written;
3. the working tree must be clean (an uncommitted edit is drift and must never be committed or
   clobbered by a write it did not come from);
4. the new tree is built in a temporary index (``GIT_INDEX_FILE``): ``read-tree`` HEAD,
   ``hash-object -w`` the blobs, ``update-index --index-info``, ``write-tree``; then
   ``commit-tree`` with the trailers;
5. a sync marker ``.git/ratchet-sync.json`` ``{old, new, old_tree, new_tree}`` is written, then
   ``git update-ref HEAD <new> <old>``: compare-and-set on the ref, **the commit point**. Losing
   the race raises :class:`ConcurrentWriteError` and nothing is committed;
6. the index and working tree are brought to the new tree (``read-tree -m -u old new``) and the
   marker is removed.

Crash ordering: before step 5's ref update nothing visible changed (unreferenced objects are
garbage, not state). After it, the receipt exists -- the commit carries the trailers -- so
``lookup_receipt`` finds it even if the process died before the working tree was updated. The
marker makes every later call (observe, lookup, execute) finish step 6 first, so ``observe()``
then shows the clean post-state that ``predict_post_state`` promised. If finishing fails (someone
edited the files meanwhile) the marker stays, the edit shows as drift and execute refuses.

``predict_post_state`` and ``dry_run_diff`` build the same tree with a scratch object directory
(``GIT_OBJECT_DIRECTORY`` plus the real one as an alternate), so they write nothing to the
repository at all.

``git`` runs with a fixed environment: no system or global config (``GIT_CONFIG_NOSYSTEM``,
``GIT_CONFIG_GLOBAL``), ``HOME`` and ``XDG_CONFIG_HOME`` pointing nowhere (no user excludes or
attributes), no prompts, ``LC_ALL=C``, and ``-c`` overrides for fsmonitor, signing and autocrlf.
Only the instance id is cached: another process may commit between two calls.

This module imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime.adapters.base import (
    DELETE_FILE,
    WRITE_FILE,
    BlobSource,
    FileChange,
    Observation,
    check_call,
    check_no_nested_paths,
    exclusive_lock,
    fetch_blob,
    parse_change,
    parse_file_action,
    receipt_from_json,
)
from runtime.core.canonical import DigestKind, canonical_json, digest
from runtime.core.checkpoint import Action, Receipt
from runtime.core.crashpoints import crash_point, register
from runtime.errors import (
    AdapterCommandError,
    AdapterStoreCorruptError,
    AdapterTargetError,
    AdapterTimeoutError,
    ConcurrentWriteError,
    DuplicateReceiptError,
    FencingTokenError,
    InvalidActionError,
    PathEscapeError,
    PreconditionFailedError,
)

KIND = "git"
ADAPTER_VERSION = "ratchet-git/1"
COMMIT = "commit"

TRAILER_KEY = "Idempotency-Key"
TRAILER_INTENT = "Intent-Digest"
TRAILER_FENCE = "Fencing-Token"
TRAILER_APPROVAL = "Approval-Digest"
_OWN_TRAILERS = (TRAILER_KEY, TRAILER_INTENT, TRAILER_FENCE, TRAILER_APPROVAL)

COMMITTER_NAME = "Ratchet"
COMMITTER_EMAIL = "ratchet@localhost"
CONFIG_INSTANCE_ID = "ratchet.instance-id"
FENCE_FILE = "ratchet-fence"
SYNC_FILE = "ratchet-sync.json"
LOCK_FILE = "ratchet.lock"

LOCK_TIMEOUT_SECONDS = 30.0
GIT_TIMEOUT_SECONDS = 120.0
MAX_ATTACHMENT_BYTES = 64 * 1024
MAX_CHANGES = 10_000

# Repository config must not change what the adapter does: no fsmonitor daemons or hooks run
# from config, no signing prompts, no line-ending conversion, no background gc in our calls.
_GIT_OPTIONS = (
    "-c", "core.fsmonitor=false",
    "-c", "commit.gpgSign=false",
    "-c", "core.autocrlf=false",
    "-c", "core.quotePath=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)

CP_BEFORE_WRITE = register(
    "git.before_write",
    "git: action validated, blobs checked, fence persisted; no object written, HEAD unchanged",
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

_LOG_FORMAT = "--format=%H%x1f%T%x1f%P%x1f%ct%x1f%(trailers:only,unfold,separator=%x1e)"
_RAW_DATE = re.compile(r"^@?(\d{1,12}) ([+-])(\d{2})(\d{2})$")
_IDENT_BAD = re.compile(r"[<>\x00-\x1f\x7f]")
_MESSAGE_BAD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class _Commit:
    sha: str
    tree: str
    parents: tuple[str, ...]
    committed_epoch: int
    trailers: Mapping[str, tuple[str, ...]]

    @property
    def keys(self) -> tuple[str, ...]:
        return self.trailers.get(TRAILER_KEY.lower(), ())


@dataclass(frozen=True)
class _Plan:
    changes: list[FileChange]
    message: str
    author: tuple[str, str, str] | None  # name, email, raw git date


def _display(path_bytes: bytes) -> str:
    return path_bytes.decode("utf-8", "backslashreplace")


def git_date(value: Any) -> str:
    """Normalise a git author date to git's raw ``"<epoch> <+hhmm>"`` form.

    Accepts ISO 8601 with an offset (``2026-01-02T03:04:05+01:00``, ``...Z``) or raw
    ``<epoch> <+hhmm>`` (optionally ``@``-prefixed). Sub-second parts are dropped (git stores
    whole seconds). Raw form keeps git's lenient date parser out of the picture.

    Raises:
        InvalidActionError: anything else, including ISO dates without an offset.
    """
    if not isinstance(value, str):
        raise InvalidActionError("author_date must be a string")
    raw = _RAW_DATE.match(value.strip())
    if raw:
        return f"{int(raw.group(1))} {raw.group(2)}{raw.group(3)}{raw.group(4)}"
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidActionError("author_date is neither ISO 8601 nor '<epoch> <+hhmm>'",
                                 author_date=value[:40]) from None
    offset = when.utcoffset()
    if offset is None:
        raise InvalidActionError("author_date needs a UTC offset", author_date=value[:40])
    minutes = int(offset / timedelta(minutes=1))
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{int(when.timestamp())} {sign}{minutes // 60:02d}{minutes % 60:02d}"


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
    adapter_version = ADAPTER_VERSION

    def __init__(self, target: str | Path, *, git: str = "git",
                 lock_timeout: float = LOCK_TIMEOUT_SECONDS) -> None:
        path = Path(target)
        if not path.is_dir():
            raise AdapterTargetError("git target is not a directory", target=str(path))
        self.root = path.resolve()
        self._git = git
        self._lock_timeout = lock_timeout
        probe = self._run(["rev-parse", "--is-bare-repository", "--show-toplevel",
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
        head = self._run(["rev-parse", "--verify", "-q", "HEAD^{commit}"], check=False)
        if head.returncode != 0:
            raise AdapterTargetError("repository has no commits; make an initial commit",
                                     target=str(self.root))
        with self._locked():
            self._instance_id = self._load_or_create_instance_id()
        self.namespace = f"{KIND}:{self._instance_id}"

    # --- public API -----------------------------------------------------------------------

    def instance_id(self) -> str:
        """The repository identity from its config key ``ratchet.instance-id``."""
        return self._instance_id

    def observe(self) -> Observation:
        """Finish any interrupted write, then return instance, HEAD, fingerprint and evidence.

        Attachments: ``head.txt`` (commit and tree sha) and ``status.txt`` (one ``XY path`` line
        per uncommitted entry, cut at 64 KiB).

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
            state_fingerprint=self._fingerprint(tree, dirty),
            kind=KIND,
            attachments={"head.txt": f"commit {head}\ntree {tree}\n".encode("ascii"),
                         "status.txt": status},
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
        """Land ``action`` as one commit carrying the key, intent and fencing trailers.

        Args:
            action: ``write_file`` / ``delete_file`` (one path), or ``commit`` with params
                ``message``, ``author_name``, ``author_email``, ``author_date`` and ``changes``
                (``[{"op": "write", "path", "content": "sha256:...", "executable"}, {"op":
                "delete", "path"}]``), committed with the original message and author.
            idempotency_key: 1-200 printable characters, derived before the write.
            intent_digest: ``sha256:`` digest of the action.
            fencing_token: the caller's lease version (>= 0).
            blobs: ``digest -> bytes`` for file contents.
            approval_digest: bound into the commit (``Approval-Digest`` trailer) when given.

        Returns:
            The receipt read back from the commit; for a key already in history, that commit's
            receipt unchanged, with nothing written.

        Raises:
            FencingTokenError: the token is older than the newest seen; nothing written.
            DuplicateReceiptError: the key is on more than one commit already.
            InvalidActionError, PathEscapeError, BlobDigestMismatchError,
            BlobUnavailableError, PreconditionFailedError (dirty working tree, file in the way,
            nothing to delete): nothing written.
            ConcurrentWriteError: HEAD moved under the compare-and-set; nothing committed.
            AdapterBusyError, AdapterCommandError, AdapterTimeoutError.
        """
        check_call(idempotency_key=idempotency_key, intent_digest=intent_digest,
                   fencing_token=fencing_token, approval_digest=approval_digest)
        with self._locked():
            self._recover_locked()
            commits = self._ratchet_commits()
            self._check_fence(commits, fencing_token, idempotency_key)
            existing = self._find(commits, idempotency_key)
            if existing is not None:
                self._raise_fence(fencing_token)
                return self._receipt(existing)
            plan = self._parse(action)
            contents = self._fetch(plan.changes, blobs)
            head, tree = self._head()
            if self._dirty_entries():
                raise PreconditionFailedError(
                    "the working tree has uncommitted changes; refusing to write over drift",
                    instance_id=self._instance_id, idempotency_key=idempotency_key)
            self._check_paths(tree, plan.changes)
            self._raise_fence(fencing_token)
            crash_point(CP_BEFORE_WRITE)
            with tempfile.TemporaryDirectory(prefix="ratchet-git-") as scratch:
                new_tree = self._build_tree(tree, plan.changes, contents,
                                            {"GIT_INDEX_FILE": str(Path(scratch) / "index")})
            message = self._message(plan.message, idempotency_key=idempotency_key,
                                    intent_digest=intent_digest, fencing_token=fencing_token,
                                    approval_digest=approval_digest)
            commit = self._commit_tree(new_tree, head, message, plan.author)
            self._atomic_git_write(SYNC_FILE, canonical_json(
                {"old": head, "new": commit, "old_tree": tree, "new_tree": new_tree}))
            crash_point(CP_BEFORE_REF_UPDATE)
            moved = self._run(["update-ref", "-m", f"ratchet: {idempotency_key}", "HEAD", commit,
                               head], check=False)
            if moved.returncode != 0:
                self._remove_git_file(SYNC_FILE)
                current, _ = self._head()
                if current != head:
                    raise ConcurrentWriteError(instance_id=self._instance_id,
                                               idempotency_key=idempotency_key,
                                               expected_head=head, actual_head=current)
                raise self._command_error(["update-ref"], moved)
            crash_point(CP_AFTER_REF_UPDATE)
            # Step 6 runs through the same code a recovering process uses after a crash here, so
            # the normal path and the recovery path cannot drift apart.
            self._recover_locked()
            crash_point(CP_AFTER_WRITE)
            return self._receipt(self._commit_info(commit))

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The receipt of the one commit in HEAD's history carrying the key, or None.

        Raises:
            DuplicateReceiptError: more than one commit carries the key.
            AdapterStoreCorruptError: that commit's trailers are malformed.
        """
        with self._locked():
            self._recover_locked()
            commits = self._ratchet_commits()
        found = self._find(commits, idempotency_key)
        return self._receipt(found) if found is not None else None

    def receipts(self) -> list[Receipt]:
        """Receipts of every commit in HEAD's history with an ``Idempotency-Key``, oldest first.

        Duplicates are listed, not hidden: the engine's audit counts them.

        Raises:
            AdapterStoreCorruptError: a commit with the key trailer has malformed trailers.
        """
        with self._locked():
            self._recover_locked()
            commits = self._ratchet_commits()
        return [self._receipt(c) for c in commits]

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """Fingerprint after committing ``action`` on the current HEAD; writes nothing.

        Uncommitted entries are carried over as they are (``execute`` itself would refuse a
        dirty working tree).

        Raises:
            The same validation errors as :meth:`execute`.
        """
        plan = self._parse(action)
        contents = self._fetch(plan.changes, blobs)
        with self._locked():
            self._recover_locked()
            _, tree = self._head()
            self._check_paths(tree, plan.changes)
            dirty = self._dirty_entries()
            with self._scratch() as env:
                new_tree = self._build_tree(tree, plan.changes, contents, env)
        return self._fingerprint(new_tree, dirty)

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """``git diff-tree -p`` between HEAD's tree and the tree ``action`` would commit.

        Raises:
            The same validation errors as :meth:`execute`.
        """
        plan = self._parse(action)
        contents = self._fetch(plan.changes, blobs)
        with self._locked():
            self._recover_locked()
            _, tree = self._head()
            self._check_paths(tree, plan.changes)
            with self._scratch() as env:
                new_tree = self._build_tree(tree, plan.changes, contents, env)
                diff = self._run(["diff-tree", "-r", "-p", "--no-color", "--no-ext-diff",
                                  "--no-textconv", "--no-renames", tree, new_tree], env=env)
        return diff.stdout.decode("utf-8", "replace")

    # --- action parsing -------------------------------------------------------------------

    def _parse(self, action: Action) -> _Plan:
        if action.kind in (WRITE_FILE, DELETE_FILE):
            change = parse_file_action(action)
            verb = "write" if change.op == "write" else "delete"
            return _Plan([change], f"ratchet: {verb} {change.path}", None)
        if action.kind != COMMIT:
            raise InvalidActionError(f"unsupported action kind {action.kind!r}")
        if action.target:
            raise InvalidActionError("a commit action has an empty target")
        expected = {"message", "author_name", "author_email", "author_date", "changes"}
        if set(action.params) != expected:
            raise InvalidActionError(f"commit params must be exactly {sorted(expected)}")
        p = action.params
        message = p["message"]
        if not isinstance(message, str) or not message.strip() or _MESSAGE_BAD.search(message):
            raise InvalidActionError("commit message must be non-empty text without control "
                                     "characters")
        for line in message.splitlines():
            head = line.split(":", 1)[0].strip().lower()
            if ":" in line and head in {t.lower() for t in _OWN_TRAILERS}:
                # A forged trailer in the message could claim another key's receipt.
                raise InvalidActionError("commit message must not carry Ratchet's own trailers")
        name, email = p["author_name"], p["author_email"]
        for label, value in (("author_name", name), ("author_email", email)):
            if (not isinstance(value, str) or not value.strip() or len(value) > 200
                    or _IDENT_BAD.search(value) or value != value.strip()):
                raise InvalidActionError(f"{label} must be 1-200 characters without <, > or "
                                         "control characters")
        changes_raw = p["changes"]
        if not isinstance(changes_raw, list) or not changes_raw or len(changes_raw) > MAX_CHANGES:
            raise InvalidActionError(f"changes must be a list of 1-{MAX_CHANGES} changes")
        changes = [parse_change(entry) for entry in changes_raw]
        check_no_nested_paths(changes)
        return _Plan(changes, message, (str(name), str(email), git_date(p["author_date"])))

    @staticmethod
    def _fetch(changes: list[FileChange], blobs: BlobSource) -> dict[str, bytes]:
        return {c.path: fetch_blob(blobs, c.content, path=c.path)
                for c in changes if c.op == "write" and c.content is not None}

    @staticmethod
    def _message(text: str, *, idempotency_key: str, intent_digest: str, fencing_token: int,
                 approval_digest: str | None) -> bytes:
        trailers = [f"{TRAILER_KEY}: {idempotency_key}", f"{TRAILER_INTENT}: {intent_digest}",
                    f"{TRAILER_FENCE}: {fencing_token}"]
        if approval_digest is not None:
            trailers.append(f"{TRAILER_APPROVAL}: {approval_digest}")
        # A blank line makes our block the last paragraph, which is where git looks for trailers.
        return (text.rstrip("\n") + "\n\n" + "\n".join(trailers) + "\n").encode("utf-8")

    # --- tree checks and building ---------------------------------------------------------

    def _check_paths(self, tree: str, changes: list[FileChange]) -> None:
        """Reject writes through symlinks or over directories/submodules, and absent deletes.

        Raises:
            PathEscapeError: a symlink on the path (in the tree or the working tree).
            PreconditionFailedError: a file, submodule or directory in the way, or a delete of
                a path that is not a file.
        """
        queries: list[str] = []
        for change in changes:
            parts = change.path.split("/")
            queries.extend("/".join(parts[: i + 1]) for i in range(len(parts)))
        queries = list(dict.fromkeys(queries))
        batch = "".join(f"{tree}:{q}\n" for q in queries).encode("utf-8")
        out = self._run(["cat-file", "--batch-check=%(objecttype)"], input=batch).stdout
        answers = out.decode("utf-8", "replace").splitlines()
        if len(answers) != len(queries):
            raise AdapterCommandError("git cat-file answered an unexpected number of lines")
        kinds = {q: (None if a.endswith(" missing") else a)
                 for q, a in zip(queries, answers, strict=True)}
        deleted = {c.path for c in changes if c.op == "delete"}
        for change in changes:
            parts = change.path.split("/")
            for i in range(len(parts)):
                sub = "/".join(parts[: i + 1])
                kind = kinds[sub]
                last = i == len(parts) - 1
                on_disk = self.root / sub
                if on_disk.is_symlink():
                    raise PathEscapeError("a symlink in the working tree is on the path", path=sub)
                if kind is None:
                    if last and change.op == "delete":
                        raise PreconditionFailedError("nothing to delete: the path is not in HEAD",
                                                      path=change.path)
                    if os.path.lexists(on_disk) and (last or not on_disk.is_dir()):
                        # An ignored file in the way: the checkout after the ref update would
                        # silently overwrite local data nobody approved losing.
                        raise PreconditionFailedError("an untracked or ignored file is in the way",
                                                      path=sub)
                    break
                if kind == "tree" and not last:
                    continue
                if kind == "blob" and not last and sub in deleted and change.op == "write":
                    break  # a file this commit deletes turns into a directory: nothing is in the way
                if kind == "blob" and self._mode(tree, sub) == "120000":
                    raise PathEscapeError("a symlink is on the path; links are never written "
                                          "through or replaced", path=sub)
                if kind == "blob" and last:
                    continue
                raise PreconditionFailedError(f"a {kind} is in the way of the path", path=sub)

    def _mode(self, tree: str, path: str) -> str:
        # All strict prefixes of ``path`` are trees here, so ls-tree shows exactly this entry.
        out = self._run(["ls-tree", "-z", tree, "--", path]).stdout
        for record in out.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            if name.decode("utf-8", "surrogateescape") == path:
                return meta.split(b" ")[0].decode("ascii")
        raise AdapterCommandError("git ls-tree did not list a path cat-file found", path=path)

    def _build_tree(self, tree: str, changes: list[FileChange], contents: Mapping[str, bytes],
                    env: Mapping[str, str]) -> str:
        """Apply ``changes`` to ``tree`` in the index named by ``env`` and return the new tree."""
        self._run(["read-tree", tree], env=env)
        zero = "0" * len(tree)
        records = []
        for change in changes:
            if change.op == "write":
                blob = self._run(["hash-object", "-w", "--stdin"], input=contents[change.path],
                                 env=env).stdout.decode("ascii").strip()
                mode = "100755" if change.executable else "100644"
                records.append(f"{mode} {blob}\t{change.path}")
            else:
                records.append(f"0 {zero}\t{change.path}")
        payload = "".join(r + "\0" for r in records).encode("utf-8")
        self._run(["update-index", "-z", "--index-info"], input=payload, env=env)
        return self._run(["write-tree"], env=env).stdout.decode("ascii").strip()

    def _commit_tree(self, tree: str, parent: str, message: bytes,
                     author: tuple[str, str, str] | None) -> str:
        now = f"{int(time.time())} +0000"
        name, email, date = author if author is not None else (COMMITTER_NAME, COMMITTER_EMAIL, now)
        env = {
            "GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_NAME": COMMITTER_NAME, "GIT_COMMITTER_EMAIL": COMMITTER_EMAIL,
            # The committer date is the real commit time: it becomes the receipt's committed_at,
            # which approval-expiry checks rely on (DESIGN.md section 6, trust boundary).
            "GIT_COMMITTER_DATE": now,
        }
        out = self._run(["commit-tree", tree, "-p", parent, "-F", "-"], input=message, env=env)
        return out.stdout.decode("ascii").strip()

    @contextlib.contextmanager
    def _scratch(self) -> Iterator[dict[str, str]]:
        """Environment for a throwaway index and object directory (the real one as alternate)."""
        with tempfile.TemporaryDirectory(prefix="ratchet-git-") as scratch:
            objects = Path(scratch) / "objects"
            objects.mkdir()
            yield {"GIT_INDEX_FILE": str(Path(scratch) / "index"),
                   "GIT_OBJECT_DIRECTORY": str(objects),
                   "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(self._objects_dir)}

    # --- state ----------------------------------------------------------------------------

    def _head(self) -> tuple[str, str]:
        out = self._run(["log", "-1", "--format=%H%x1f%T", "HEAD", "--"]).stdout
        head, _, tree = out.decode("ascii").strip().partition("\x1f")
        return head, tree

    def _dirty_entries(self) -> list[dict[str, Any]]:
        out = self._run(["status", "--porcelain=v1", "-z", "--untracked-files=all",
                         "--no-renames", "--ignore-submodules=none"],
                        env={"GIT_OPTIONAL_LOCKS": "0"}).stdout
        entries = []
        for record in out.split(b"\0"):
            if len(record) < 4:
                continue
            path = record[3:]
            entries.append({"xy": record[:2].decode("ascii", "replace"), "path": _display(path),
                            "content": self._worktree_digest(path)})
        return sorted(entries, key=lambda e: (e["path"], e["xy"]))

    def _worktree_digest(self, path: bytes) -> str | None:
        full = os.path.join(os.fsencode(self.root), path)
        try:
            st = os.lstat(full)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return "symlink:" + _display(os.readlink(full))
        if not stat.S_ISREG(st.st_mode):
            return None
        h = hashlib.sha256()
        try:
            with open(full, "rb") as handle:
                while chunk := handle.read(1 << 20):
                    h.update(chunk)
        except OSError:
            return None
        mode = "x" if st.st_mode & stat.S_IXUSR else "-"
        return f"sha256:{h.hexdigest()}:{mode}"

    @staticmethod
    def _fingerprint(tree: str, dirty: list[dict[str, Any]]) -> str:
        return digest(DigestKind.ENVIRONMENT, {"tree": tree, "dirty": dirty})

    # --- history as the receipt store -----------------------------------------------------

    def _ratchet_commits(self) -> list[_Commit]:
        """Commits reachable from HEAD with an Idempotency-Key trailer, oldest first."""
        out = self._run(["log", "-z", "--topo-order", "--reverse", "--fixed-strings",
                         "--regexp-ignore-case", f"--grep={TRAILER_KEY}", _LOG_FORMAT,
                         "HEAD", "--"])
        commits = [self._parse_log_record(r) for r in out.stdout.split(b"\0") if r.strip(b"\n")]
        return [c for c in commits if c.keys]

    def _commit_info(self, sha: str) -> _Commit:
        out = self._run(["log", "-1", "-z", _LOG_FORMAT, sha, "--"]).stdout
        return self._parse_log_record(out.rstrip(b"\0"))

    def _parse_log_record(self, record: bytes) -> _Commit:
        fields = record.decode("utf-8", "replace").strip("\n").split("\x1f")
        if len(fields) != 5 or not fields[3].isdigit():
            raise AdapterStoreCorruptError("unexpected git log record",
                                           instance_id=self._instance_id)
        trailers: dict[str, list[str]] = {}
        for item in fields[4].split("\x1e"):
            name, sep, value = item.partition(":")
            if sep:
                # git matches trailer keys case-insensitively; so do we.
                trailers.setdefault(name.strip().lower(), []).append(value.strip())
        return _Commit(sha=fields[0], tree=fields[1], parents=tuple(fields[2].split()),
                       committed_epoch=int(fields[3]),
                       trailers={k: tuple(v) for k, v in trailers.items()})

    def _find(self, commits: list[_Commit], key: str) -> _Commit | None:
        matches = [c for c in commits if key in c.keys]
        if len(matches) > 1:
            raise DuplicateReceiptError(instance_id=self._instance_id, idempotency_key=key,
                                        commits=",".join(c.sha for c in matches))
        return matches[0] if matches else None

    def _receipt(self, commit: _Commit) -> Receipt:
        t = commit.trailers
        keys, intents = t.get(TRAILER_KEY.lower(), ()), t.get(TRAILER_INTENT.lower(), ())
        tokens, approvals = t.get(TRAILER_FENCE.lower(), ()), t.get(TRAILER_APPROVAL.lower(), ())
        if (len(keys) != 1 or len(intents) != 1 or len(tokens) != 1 or len(approvals) > 1
                or not tokens[0].isdigit()):
            raise AdapterStoreCorruptError("commit carries malformed Ratchet trailers",
                                           instance_id=self._instance_id, commit=commit.sha)
        body = {
            "namespace": self.namespace,
            "adapter_version": ADAPTER_VERSION,
            "receipt_id": commit.sha,
            "idempotency_key": keys[0],
            "intent_digest": intents[0],
            "result": {"commit": commit.sha, "tree": commit.tree,
                       "parent": commit.parents[0] if commit.parents else ""},
            "environment_version_after": commit.sha,
            "fencing_token": int(tokens[0]),
            "committed_at": datetime.fromtimestamp(commit.committed_epoch, UTC).isoformat(),
            "approval_digest": approvals[0] if approvals else None,
            "business_object": commit.sha,
        }
        return receipt_from_json(canonical_json(body), where=f"commit {commit.sha}")

    # --- fence, identity, recovery --------------------------------------------------------

    def _read_fence(self) -> int:
        try:
            text = (self._git_dir / FENCE_FILE).read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return 0
        except UnicodeDecodeError:
            text = ""
        if not text.isdigit():
            raise AdapterStoreCorruptError(f".git/{FENCE_FILE} is not a number",
                                           instance_id=self._instance_id)
        return int(text)

    def _check_fence(self, commits: list[_Commit], token: int, key: str) -> None:
        newest = self._read_fence()
        for commit in commits:
            for value in commit.trailers.get(TRAILER_FENCE.lower(), ()):
                if value.isdigit():
                    newest = max(newest, int(value))
        if token < newest:
            raise FencingTokenError(instance_id=self._instance_id, idempotency_key=key,
                                    fencing_token=token, newest_seen=newest)

    def _raise_fence(self, token: int) -> None:
        if token > self._read_fence():
            self._atomic_git_write(FENCE_FILE, f"{token}\n".encode("ascii"))

    def _load_or_create_instance_id(self) -> str:
        got = self._run(["config", "--local", "--get", CONFIG_INSTANCE_ID], check=False)
        if got.returncode == 1:
            new = str(uuid.uuid4())
            self._run(["config", "--local", CONFIG_INSTANCE_ID, new])
            return new
        if got.returncode != 0:
            raise self._command_error(["config"], got)
        value = got.stdout.decode("utf-8", "replace").strip()
        if not value or len(value) > 200 or any(ch.isspace() for ch in value):
            raise AdapterStoreCorruptError(
                f"{CONFIG_INSTANCE_ID} in the repository config is invalid", target=str(self.root))
        return value

    def _recover_locked(self) -> None:
        """Finish an interrupted write's working-tree update (see the module docstring)."""
        marker = self._git_dir / SYNC_FILE
        try:
            data = json.loads(marker.read_bytes())
        except FileNotFoundError:
            return
        except ValueError:
            data = None
        if isinstance(data, dict) and all(isinstance(data.get(k), str)
                                          for k in ("old", "new", "old_tree", "new_tree")):
            head, _ = self._head()
            if head == data["new"]:
                synced = self._run(["read-tree", "-m", "-u", data["old_tree"], data["new_tree"]],
                                   check=False)
                if synced.returncode != 0:
                    # Someone edited the files meanwhile: keep the marker, let the drift show.
                    return
            # HEAD at "old": the ref update never happened. HEAD elsewhere: another writer moved
            # it and owns the working tree now. Either way there is nothing of ours to finish.
        self._remove_git_file(SYNC_FILE)

    # --- files in .git and the lock -------------------------------------------------------

    def _atomic_git_write(self, name: str, data: bytes) -> None:
        tmp = self._git_dir / f"{name}.tmp-{uuid.uuid4().hex}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self._git_dir / name)
        self._fsync_git_dir()

    def _remove_git_file(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._git_dir / name)
            self._fsync_git_dir()

    def _fsync_git_dir(self) -> None:
        fd = os.open(self._git_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive_lock(self._git_dir / LOCK_FILE, timeout=self._lock_timeout, target=str(self.root)):
            yield

    # --- running git ----------------------------------------------------------------------

    @staticmethod
    def _base_env() -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": os.devnull,
            "XDG_CONFIG_HOME": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ADVICE": "0",
            "LC_ALL": "C",
            "LANG": "C",
        }

    def _run(self, args: list[str], *, input: bytes | None = None,
             env: Mapping[str, str] | None = None, check: bool = True
             ) -> subprocess.CompletedProcess[bytes]:
        cmd = [self._git, "-C", str(self.root), *_GIT_OPTIONS, *args]
        full_env = self._base_env()
        if env:
            full_env.update(env)
        try:
            proc = subprocess.run(cmd, input=input, capture_output=True, env=full_env, check=False,
                                  timeout=GIT_TIMEOUT_SECONDS)
        except FileNotFoundError:
            raise AdapterCommandError("git executable not found", git=self._git) from None
        except subprocess.TimeoutExpired:
            raise AdapterTimeoutError(f"git {args[0]} timed out after {GIT_TIMEOUT_SECONDS} s",
                                      target=str(self.root)) from None
        if check and proc.returncode != 0:
            raise self._command_error(args, proc)
        return proc

    def _command_error(self, args: list[str], proc: subprocess.CompletedProcess[bytes]
                       ) -> AdapterCommandError:
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        detail = first[0][:200] if first else "no message"
        return AdapterCommandError(f"git {args[0]} failed: {detail}", exit_code=proc.returncode,
                                   target=str(self.root))
