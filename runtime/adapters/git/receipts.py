"""Receipts in git history: the trailers a Ratchet commit carries and how they are read back.

Every write lands as exactly one commit whose message is the planned message, byte for byte,
with the receipt trailers added the way git adds a trailer (DESIGN.md sections 5 and 5.16)::

    Idempotency-Key: <key>
    Intent-Digest: sha256:<hex>
    Fencing-Token: <n>
    Approval-Digest: sha256:<hex>      (only when the write was approved)
    Committed-At: <epoch seconds>      (when Ratchet made the commit)

When the planned message ends in a trailer block by git's rules (``Signed-off-by``,
``Co-authored-by``, ``(cherry picked from commit ...)``, ...), these lines join that block, so
git still reads the message's own trailers, followed by Ratchet's; otherwise they form the
last paragraph, after one blank line (a message ending in a newline gains exactly one more).
A block that already holds one of Ratchet's trailer names (a history Ratchet itself replayed,
or a forgery) is never joined: Ratchet's lines then form a paragraph of their own, so the only
Ratchet trailers git reads are this write's. An ignorable tail (trailing blank or ``#`` lines,
an old ``Conflicts:`` block, a scissors line) stays after them, as ``git interpret-trailers``
keeps it. An empty or blank message gets the title :data:`BLANK_MESSAGE_TITLE` before the
trailers, because git takes the first paragraph for the title and never for trailers.

Every read goes through one reader, :mod:`runtime.adapters.git.trailers` (git's rules), on
the raw message bytes from the object database: the commits the key index's ``git log`` lists,
and a commit just written. Receipts written before the trailers joined a block (always ``\\n\\n`` and a last
paragraph of their own) are read the same way. History below the instance's base commit (HEAD
when the adapter first opened the repository; a replay target's base is the clone's checkout)
is never read at all: a source's own trailers there, forged or real, are not this instance's
receipts and do not raise its fence. ``Committed-At`` is the receipt's commit time: a replayed
commit keeps its original committer date, while approval-expiry checks need the real time of
the write (DESIGN.md section 6, trust boundary); commits made before this trailer existed fall
back to the committer date. Imports nothing from Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pygit2

from runtime.adapters.fence import fence_read
from runtime.adapters.git.process import GitProcess
from runtime.adapters.git.trailers import trailer_block, trailers_add, trailers_of
from runtime.adapters.receipt_json import receipt_from_json
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Receipt
from runtime.errors import (
    AdapterStoreCorruptError,
    DuplicateReceiptError,
    FencingTokenError,
    InvalidActionError,
)

ADAPTER_VERSION = "ratchet-git/1"

TRAILER_KEY = "Idempotency-Key"
TRAILER_INTENT = "Intent-Digest"
TRAILER_FENCE = "Fencing-Token"
TRAILER_APPROVAL = "Approval-Digest"
TRAILER_COMMITTED_AT = "Committed-At"

LOG_FORMAT = "--format=%H%x1f%T%x1f%P%x1f%ct"
"""``git log`` format :func:`parse_log_record` reads (records separated with ``-z``); the
message is read raw from the object database, since ``git log`` re-encodes it to UTF-8."""

RATCHET_TRAILERS = frozenset(name.lower() for name in (
    TRAILER_KEY, TRAILER_INTENT, TRAILER_FENCE, TRAILER_APPROVAL, TRAILER_COMMITTED_AT))
"""Trailer names (lower case) a source block must not hold for Ratchet's lines to join it."""

BLANK_MESSAGE_TITLE = b"(empty commit message)"
"""Put between a blank message and the trailers: git reads the first non-blank paragraph as the
title, never as trailers. :func:`original_message` takes it out again."""

_OUR_LINES = re.compile(
    rb"^Idempotency-Key: [^\n]*\nIntent-Digest: [^\n]*\nFencing-Token: [^\n]*\n"
    rb"(?:Approval-Digest: [^\n]*\n)?(?:Committed-At: [^\n]*\n)?", re.MULTILINE)
_PROBE = [f"{TRAILER_KEY}: k".encode(), f"{TRAILER_INTENT}: sha256:0".encode(),
          f"{TRAILER_FENCE}: 0".encode(), f"{TRAILER_COMMITTED_AT}: 0".encode()]
_COMMITTER_STAMP = re.compile(rb"> (\d{1,10}) [+-]\d{4}\Z")


@dataclass(frozen=True)
class LoggedCommit:
    """One commit as ``git log`` printed it: ids, committer time and trailers by lower-case key."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    committed_epoch: int
    trailers: Mapping[str, tuple[str, ...]]

    @property
    def keys(self) -> tuple[str, ...]:
        return self.trailers.get(TRAILER_KEY.lower(), ())


def _placed(message: bytes, lines: list[bytes]) -> bytes | None:
    if message.isspace() or not message:
        # git takes the first non-blank paragraph as the title, never as trailers.
        message += b"\n\n" + BLANK_MESSAGE_TITLE
        return message + b"\n\n" + b"".join(line + b"\n" for line in lines)
    own = any(name.lower() in RATCHET_TRAILERS for name, _ in trailers_of(message))
    return trailers_add(message, lines, join=not own)


def receipt_fits(message: bytes) -> bool:
    """Whether git would read receipt trailers added to ``message`` as its last trailers.

    False only for a message git reads no trailers after at all: one that opens with a
    scissors line (git ignores everything from it on) and has no title before it.
    """
    return _placed(message, _PROBE) is not None


def message_with_trailers(message: bytes, *, idempotency_key: str, intent_digest: str,
                          fencing_token: int, approval_digest: str | None,
                          committed_at: int) -> bytes:
    """The commit message: ``message`` with the receipt trailers added (module docstring).

    Raises:
        InvalidActionError: git would not read the trailers back (:func:`receipt_fits`).
    """
    lines = [f"{TRAILER_KEY}: {idempotency_key}", f"{TRAILER_INTENT}: {intent_digest}",
             f"{TRAILER_FENCE}: {fencing_token}"]
    if approval_digest is not None:
        lines.append(f"{TRAILER_APPROVAL}: {approval_digest}")
    lines.append(f"{TRAILER_COMMITTED_AT}: {committed_at}")
    placed = _placed(message, [line.encode("utf-8") for line in lines])
    if placed is None:
        raise InvalidActionError("git would not read receipt trailers after this commit message "
                                 "(it opens with a scissors line)")
    return placed


def original_message(full: bytes) -> bytes:
    """The planned message of a Ratchet commit: ``full`` (the raw message) minus the receipt.

    The receipt lines are taken out with the one blank line put before them when they formed
    a paragraph of their own. A planned message that ended without a newline cannot be told
    from one that ended with one (both read ``...\\n\\n<trailers>``), so it comes back with one
    final newline; every other message comes back byte for byte.

    Args:
        full: the message part of the raw commit object (after the first blank line of
            ``git cat-file commit``), in the commit's own encoding.

    Raises:
        ValueError: ``full`` carries no Ratchet trailer lines.
    """
    block = trailer_block(full)
    runs = list(_OUR_LINES.finditer(full))
    # The run git reads as trailers, not a look-alike after a scissors line of the source.
    found = [m for m in runs if block.start <= m.start() and m.end() <= block.end][-1:] or runs[-1:]
    if not found:
        raise ValueError("the message carries no Ratchet trailer block")
    before, after = full[:found[0].start()], full[found[0].end():]
    title = b"\n\n" + BLANK_MESSAGE_TITLE + b"\n\n"
    if before.endswith(title) and not after:
        blank = before[: -len(title)]
        if not blank or blank.isspace():
            return blank
    if before.endswith(b"\n\n"):
        before = before[:-1]
    return before + after


def raw_message(repo: pygit2.Repository, sha: str, *, instance_id: str) -> bytes:
    """The message bytes of commit ``sha`` exactly as stored (never re-encoded), read
    in-process from the object database.

    Raises:
        AdapterStoreCorruptError: the object is missing or is not a commit.
    """
    try:
        kind, raw = repo.odb.read(sha)
    except (pygit2.GitError, KeyError, ValueError):
        raise AdapterStoreCorruptError("a commit cannot be read back", instance_id=instance_id,
                                       commit=sha) from None
    if kind != pygit2.enums.ObjectType.COMMIT:
        raise AdapterStoreCorruptError("the object is not a commit", instance_id=instance_id,
                                       commit=sha)
    return raw.partition(b"\n\n")[2]


def parse_log_record(record: bytes, *, repo: pygit2.Repository, instance_id: str) -> LoggedCommit:
    """Parse one ``-z`` record of :data:`LOG_FORMAT` output; the trailers are read from the
    commit's raw message (:func:`raw_message`) by
    :func:`runtime.adapters.git.trailers.trailers_of`.

    Raises:
        AdapterStoreCorruptError: the record does not have the expected fields, or the commit
            cannot be read.
    """
    fields = record.decode("ascii", "replace").strip("\n").split("\x1f")
    if len(fields) != 4 or not (fields[3].isdigit() or not fields[3]):
        raise AdapterStoreCorruptError("unexpected git log record", instance_id=instance_id)
    message = raw_message(repo, fields[0], instance_id=instance_id)
    # A committer line git cannot date (a replayed header, verbatim) prints no %ct: 0 then, and
    # the receipt's time is its Committed-At trailer anyway.
    return LoggedCommit(sha=fields[0], tree=fields[1], parents=tuple(fields[2].split()),
                        committed_epoch=int(fields[3] or 0),
                        trailers=_trailer_map(trailers_of(message)))


def _trailer_map(pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """Trailer values by lower-case name (git matches trailer keys case-insensitively; so do we)."""
    trailers: dict[str, list[str]] = {}
    for name, value in pairs:
        trailers.setdefault(name.lower(), []).append(value)
    return {k: tuple(v) for k, v in trailers.items()}


def ratchet_commits(git: GitProcess, repo: pygit2.Repository, *, instance_id: str,
                    base: str | None, since: str | None = None) -> list[LoggedCommit]:
    """Commits this instance could have made that carry an ``Idempotency-Key`` trailer, oldest
    first: those reachable from HEAD and not from ``base`` (DESIGN.md section 5.5).

    Args:
        base: the instance's base commit (HEAD when the adapter first opened the repository),
            or None for an instance recorded before bases were: then all of HEAD's history.
        since: also leave out what this commit reaches (an index already holds it).
    """
    revs = ["HEAD", *(f"^{rev}" for rev in (base, since) if rev is not None)]
    out = git.run(["log", "-z", "--topo-order", "--reverse", "--fixed-strings",
                   "--regexp-ignore-case", f"--grep={TRAILER_KEY}", LOG_FORMAT, *revs, "--"])
    commits = [parse_log_record(r, repo=repo, instance_id=instance_id)
               for r in out.stdout.split(b"\0") if r.strip(b"\n")]
    return [c for c in commits if c.keys]


def commit_info(git: GitProcess, repo: pygit2.Repository, sha: str, *, instance_id: str
                ) -> LoggedCommit:
    """One commit read back the way :func:`ratchet_commits` reads it."""
    out = git.run(["log", "-1", "-z", LOG_FORMAT, sha, "--"]).stdout
    return parse_log_record(out.rstrip(b"\0"), repo=repo, instance_id=instance_id)


def written_commit(repo: pygit2.Repository, sha: str, *, instance_id: str
                   ) -> LoggedCommit | None:
    """A commit the adapter has just written, read back from the object database in-process,
    equal to what :func:`commit_info` would read; None when only git can say (the caller asks it).

    The adapter writes its commits itself (:func:`runtime.adapters.git.trees.write_commit`),
    so the tree, the parents and the committer time are read from the header it wrote, and the
    trailers from the message with the same reader :func:`parse_log_record` uses on ``git
    log``'s raw output (:func:`runtime.adapters.git.trailers.trailers_of`). A header this
    function does not recognise (no single committer line ending in a plain date) is left to git.

    Raises:
        AdapterStoreCorruptError: the object is missing or is not a commit.
    """
    try:
        kind, raw = repo.odb.read(sha)
    except (pygit2.GitError, KeyError, ValueError):
        raise AdapterStoreCorruptError("the commit just written cannot be read back",
                                       instance_id=instance_id, commit=sha) from None
    if kind != pygit2.enums.ObjectType.COMMIT:
        raise AdapterStoreCorruptError("the object just written is not a commit",
                                       instance_id=instance_id, commit=sha)
    header, _, message = raw.partition(b"\n\n")  # as raw_message() reads it
    lines = header.split(b"\n")
    if not lines[0].startswith(b"tree "):
        return None
    tree = lines[0][5:].decode("ascii", "replace")
    parents = []
    for line in lines[1:]:
        if not line.startswith(b"parent "):
            break
        parents.append(line[7:].decode("ascii", "replace"))
    stamps = [_COMMITTER_STAMP.search(line) for line in lines if line.startswith(b"committer ")]
    if len(stamps) != 1 or stamps[0] is None:
        return None
    return LoggedCommit(sha=sha, tree=tree, parents=tuple(parents),
                        committed_epoch=int(stamps[0].group(1)),
                        trailers=_trailer_map(trailers_of(message)))


def find_key(commits: Iterable[LoggedCommit], key: str, *, instance_id: str
             ) -> LoggedCommit | None:
    """The one commit carrying ``key``, or None.

    Raises:
        DuplicateReceiptError: more than one commit carries it.
    """
    matches = [c for c in commits if key in c.keys]
    if len(matches) > 1:
        raise DuplicateReceiptError(instance_id=instance_id, idempotency_key=key,
                                    commits=",".join(c.sha for c in matches))
    return matches[0] if matches else None


def newest_token(commits: Iterable[LoggedCommit]) -> int:
    """The largest ``Fencing-Token`` in ``commits`` (0 when there is none)."""
    newest = 0
    for commit in commits:
        for value in commit.trailers.get(TRAILER_FENCE.lower(), ()):
            if value.isdigit():
                newest = max(newest, int(value))
    return newest


def check_fence(fence_file: Path, history_token: int, token: int, *, key: str,
                instance_id: str) -> None:
    """Refuse ``token`` when it is older than the newest seen (DESIGN.md section 4, fencing).

    The newest token is the larger of the fence file and ``history_token``, the largest
    ``Fencing-Token`` trailer of the instance's commits (:func:`newest_token`).

    Raises:
        FencingTokenError: naming the key, the token and the newest one seen.
        AdapterStoreCorruptError: the fence file does not hold a number.
    """
    newest = max(history_token, fence_read(
        fence_file, label=f".git/{fence_file.name}", instance_id=instance_id))
    if token < newest:
        raise FencingTokenError(instance_id=instance_id, idempotency_key=key,
                                fencing_token=token, newest_seen=newest)


def receipt_of(commit: LoggedCommit, *, namespace: str, instance_id: str) -> Receipt:
    """The receipt a Ratchet commit stands for.

    Raises:
        AdapterStoreCorruptError: the commit's Ratchet trailers are missing, repeated or
            malformed.
    """
    t = commit.trailers
    keys, intents = t.get(TRAILER_KEY.lower(), ()), t.get(TRAILER_INTENT.lower(), ())
    tokens, approvals = t.get(TRAILER_FENCE.lower(), ()), t.get(TRAILER_APPROVAL.lower(), ())
    times = t.get(TRAILER_COMMITTED_AT.lower(), ())
    if (len(keys) != 1 or len(intents) != 1 or len(tokens) != 1 or len(approvals) > 1
            or not tokens[0].isdigit() or len(times) > 1
            or (times and not times[0].isdigit())):
        raise AdapterStoreCorruptError("commit carries malformed Ratchet trailers",
                                       instance_id=instance_id, commit=commit.sha)
    committed = int(times[0]) if times else commit.committed_epoch
    body = {
        "namespace": namespace,
        "adapter_version": ADAPTER_VERSION,
        "receipt_id": commit.sha,
        "idempotency_key": keys[0],
        "intent_digest": intents[0],
        "result": {"commit": commit.sha, "tree": commit.tree,
                   "parent": commit.parents[0] if commit.parents else ""},
        "environment_version_after": commit.sha,
        "fencing_token": int(tokens[0]),
        "committed_at": datetime.fromtimestamp(committed, UTC).isoformat(),
        "approval_digest": approvals[0] if approvals else None,
        "business_object": commit.sha,
    }
    return receipt_from_json(canonical_json(body), where=f"commit {commit.sha}")
