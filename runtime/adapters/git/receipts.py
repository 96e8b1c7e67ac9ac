"""Receipts in git history: the trailers a Ratchet commit carries and how they are read back.

Every write lands as exactly one commit whose message is the planned message, byte for byte,
followed by a blank line and the trailer block (DESIGN.md section 5, the adapter's receipt is
the authoritative evidence)::

    <message bytes, verbatim>\\n\\n
    Idempotency-Key: <key>
    Intent-Digest: sha256:<hex>
    Fencing-Token: <n>
    Approval-Digest: sha256:<hex>      (only when the write was approved)
    Committed-At: <epoch seconds>      (when Ratchet made the commit)

The separator is always exactly ``\\n\\n``, so :func:`original_message` recovers the planned
message exactly, whatever it ends with (CRLF, trailing blanks, no newline). An empty or blank
message gets the title :data:`BLANK_MESSAGE_TITLE` before the trailers, because git would take
a first paragraph for the title and not read it as trailers; only then is it removed again. git
reads trailers from the last paragraph only, and this block is always the last paragraph, so
trailer-looking lines inside a replayed message (even another run's ``Idempotency-Key``) are
never read as a receipt. History below the instance's base commit (HEAD when the adapter first
opened the repository; a replay target's base is the clone's checkout) is never read at all: a
source's own trailers there, forged or real, are not this instance's receipts and do not raise
its fence. ``Committed-At`` is the receipt's commit time: a replayed commit keeps
its original committer date, while approval-expiry checks need the real time of the write
(DESIGN.md section 6, trust boundary); commits made before this trailer existed fall back to
the committer date. Imports nothing from Django.
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
from runtime.adapters.receipt_json import receipt_from_json
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Receipt
from runtime.errors import AdapterStoreCorruptError, DuplicateReceiptError, FencingTokenError

ADAPTER_VERSION = "ratchet-git/1"

TRAILER_KEY = "Idempotency-Key"
TRAILER_INTENT = "Intent-Digest"
TRAILER_FENCE = "Fencing-Token"
TRAILER_APPROVAL = "Approval-Digest"
TRAILER_COMMITTED_AT = "Committed-At"

LOG_FORMAT = "--format=%H%x1f%T%x1f%P%x1f%ct%x1f%(trailers:only,unfold,separator=%x1e)"
"""``git log`` format :func:`parse_log_record` reads (records separated with ``-z``)."""

BLANK_MESSAGE_TITLE = b"(empty commit message)"
"""Put between a blank message and the trailers: git reads the first non-blank paragraph as the
title, never as trailers. :func:`original_message` takes it out again."""

_BLOCK_START = f"\n\n{TRAILER_KEY}: ".encode("ascii")
_COMMITTER_STAMP = re.compile(rb"> (\d+) [+-]\d{4}\Z")


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


def message_with_trailers(message: bytes, *, idempotency_key: str, intent_digest: str,
                          fencing_token: int, approval_digest: str | None,
                          committed_at: int) -> bytes:
    """The commit message: ``message`` verbatim, ``\\n\\n``, then the trailer block."""
    lines = [f"{TRAILER_KEY}: {idempotency_key}", f"{TRAILER_INTENT}: {intent_digest}",
             f"{TRAILER_FENCE}: {fencing_token}"]
    if approval_digest is not None:
        lines.append(f"{TRAILER_APPROVAL}: {approval_digest}")
    lines.append(f"{TRAILER_COMMITTED_AT}: {committed_at}")
    if message.isspace() or not message:
        # git takes the first non-blank paragraph as the title, never as trailers.
        message += b"\n\n" + BLANK_MESSAGE_TITLE
    return message + b"\n\n" + "\n".join(lines).encode("utf-8") + b"\n"


def original_message(full: bytes) -> bytes:
    """The planned message of a Ratchet commit: ``full`` (the raw message) minus the trailers.

    Args:
        full: the message part of the raw commit object (after the first blank line of
            ``git cat-file commit``), in the commit's own encoding.

    Raises:
        ValueError: ``full`` does not end with a Ratchet trailer block.
    """
    at = full.rfind(_BLOCK_START)
    if at < 0:
        raise ValueError("the message carries no Ratchet trailer block")
    message = full[:at]
    title = b"\n\n" + BLANK_MESSAGE_TITLE
    if message.endswith(title):
        blank = message[: -len(title)]
        if not blank or blank.isspace():
            return blank
    return message


def parse_log_record(record: bytes, *, instance_id: str) -> LoggedCommit:
    """Parse one ``-z`` record of :data:`LOG_FORMAT` output.

    Raises:
        AdapterStoreCorruptError: the record does not have the expected fields.
    """
    fields = record.decode("utf-8", "replace").strip("\n").split("\x1f")
    if len(fields) != 5 or not fields[3].isdigit():
        raise AdapterStoreCorruptError("unexpected git log record", instance_id=instance_id)
    return LoggedCommit(sha=fields[0], tree=fields[1], parents=tuple(fields[2].split()),
                        committed_epoch=int(fields[3]),
                        trailers=_trailer_map(fields[4].split("\x1e")))


def _trailer_map(items: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``Name: value`` items by lower-case name (git matches trailer keys case-insensitively;
    so do we); an item without a colon is not a trailer."""
    trailers: dict[str, list[str]] = {}
    for item in items:
        name, sep, value = item.partition(":")
        if sep:
            trailers.setdefault(name.strip().lower(), []).append(value.strip())
    return {k: tuple(v) for k, v in trailers.items()}


def ratchet_commits(git: GitProcess, *, instance_id: str, base: str | None,
                    since: str | None = None) -> list[LoggedCommit]:
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
    commits = [parse_log_record(r, instance_id=instance_id)
               for r in out.stdout.split(b"\0") if r.strip(b"\n")]
    return [c for c in commits if c.keys]


def commit_info(git: GitProcess, sha: str, *, instance_id: str) -> LoggedCommit:
    """One commit read back the way :func:`ratchet_commits` reads it."""
    out = git.run(["log", "-1", "-z", LOG_FORMAT, sha, "--"]).stdout
    return parse_log_record(out.rstrip(b"\0"), instance_id=instance_id)


def written_commit(repo: pygit2.Repository, sha: str, *, instance_id: str
                   ) -> LoggedCommit | None:
    """A commit the adapter has just written, read back from the object database in-process,
    equal to what :func:`commit_info` would read; None when only git can say (the caller asks it).

    The adapter writes its commits itself (:func:`runtime.adapters.git.trees.write_commit`):
    header lines, a blank line, then the message whose last paragraph is the Ratchet trailer
    block, one ``Name: value`` line each. git's ``%(trailers:only,unfold)`` prints exactly those
    lines for such a message, so they are read here the way :func:`parse_log_record` reads
    git's output. A commit with an ``encoding`` header is left to git (``git log`` re-encodes its
    message to UTF-8), and so is anything this function does not recognise.

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
    header, _, message = raw.partition(b"\n\n")
    tree, parents, committed = None, [], None
    for line in header.split(b"\n"):
        name, _, value = line.partition(b" ")
        if name == b"tree":
            tree = value.decode("ascii", "replace")
        elif name == b"parent":
            parents.append(value.decode("ascii", "replace"))
        elif name == b"committer":
            stamp = _COMMITTER_STAMP.search(value)
            committed = int(stamp.group(1)) if stamp else None
        elif name == b"encoding":
            return None
    at = message.rfind(_BLOCK_START)
    if tree is None or committed is None or at < 0 or not message.endswith(b"\n"):
        return None
    lines = message[at + 2:-1].decode("utf-8", "replace").split("\n")
    if any(":" not in line or line[:1].isspace() or line.startswith(":") for line in lines):
        return None  # not a block this adapter wrote: let git read it
    return LoggedCommit(sha=sha, tree=tree, parents=tuple(parents), committed_epoch=committed,
                        trailers=_trailer_map(lines))


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
