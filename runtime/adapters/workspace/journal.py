"""The workspace's receipt journal: two-phase, fsync'd, append-only (DESIGN.md section 5).

``<root>/.ratchet/journal.jsonl`` holds one canonical-JSON record per line, each fsync'd before
the call goes on:

1. ``prepared`` names the key, intent, fencing token, path, the target's pre-state and its
   post-state (content digest and executable bit), and the temp file name -- written before the
   effect;
2. ``committed`` carries the full receipt -- written after the effect's commit point (the rename
   or unlink and the directory fsync);
3. ``aborted`` frees the key of a ``prepared`` record whose effect never happened.

Why two phases: the obvious order -- rename the file into place, then append the receipt -- has a
window in which the file changed but no receipt exists. After a SIGKILL there ``lookup_receipt``
would say None while the effect is visible, and DESIGN.md section 5 forbids claiming a replay
without the adapter's receipt, so the run could only go to a human. With a ``prepared`` record
on disk first, the adapter's recovery can roll the write forward or back instead.

A torn last line (killed mid-append) was never acknowledged to anyone and is truncated when the
journal is loaded; because records are fsync'd in order, a torn ``committed`` line leaves its
``prepared`` record dangling and recovery re-derives the outcome.

Recovery (:meth:`ReceiptJournal.recover`, run by every public adapter call under the lock): a
``prepared`` record without an outcome is rolled *forward* (a ``committed`` record with the
receipt, marked ``"recovered": true``) when the target shows the post-state, rolled *back* (an
``aborted`` record; the key is free again) when it still shows the pre-state, and its temp file
is removed. A target showing neither (it was edited out of band after the crash) is left
unresolved, and the adapter raises :class:`ReceiptIndeterminateError` for that key -- only a
human can say what happened. The receipt's ``committed_at`` for a recovered write is the
recovery time: never earlier than the real rename, so an approval-expiry check errs on the side
of review.

Reading is incremental (a call must not cost O(writes); DESIGN.md section 5.3): the process keeps the state it
replayed from each of its last ``LAST_READS`` journals and where that read ended (file identity,
byte offset, the 64 bytes before it), and the next load -- by any adapter object of that
workspace in this process -- parses only the lines appended since, when the file is the same
file, no shorter, and those 64 bytes are unchanged; anything else is read again from the first
line. A full read of every line is what a new process does and what
:meth:`ReceiptJournal.recover` does with ``full=True`` (the adapter's ``receipts()``, the audit at
the end of a run). Imports nothing
from Django.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime.adapters.actions import FileChange
from runtime.adapters.durable_files import fsync_dir, write_all
from runtime.adapters.receipt_json import receipt_from_json
from runtime.adapters.workspace.files import Entry, current_entry, remove_leftover
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Receipt
from runtime.errors import AdapterStoreCorruptError

Record = dict[str, Any]
"""One parsed journal line; every record has a ``"type"`` and a string ``"key"``."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class JournalState:
    """The journal replayed into memory: committed receipts and writes still in flight.

    A committed receipt is kept as its canonical JSON (checked when its line was read) and
    parsed again only when asked for: a parsed receipt takes about four times the memory, and a
    worker keeps its last reads for the length of a run (:data:`LAST_READS`).

    Attributes:
        by_key: canonical receipt JSON by idempotency key, in journal order (oldest first);
            the workspace version is its length.
        dangling: ``prepared`` records with no ``committed`` or ``aborted`` record yet, by key.
        max_token: the newest fencing token any ``prepared`` record carries (0 if none).
    """

    by_key: dict[str, bytes] = field(default_factory=dict)
    dangling: dict[str, Record] = field(default_factory=dict)
    max_token: int = 0

    @property
    def count(self) -> int:
        """How many writes are committed."""
        return len(self.by_key)

    def receipt(self, key: str) -> Receipt | None:
        """The committed receipt under ``key``, or None.

        Raises:
            AdapterStoreCorruptError: the kept JSON does not validate (it did when its line was
                read, so only a changed receipt model would see this).
        """
        raw = self.by_key.get(key)
        return None if raw is None else receipt_from_json(raw, where=f"the receipt of {key}")

    def receipts(self) -> list[Receipt]:
        """Every committed receipt, oldest first."""
        return [receipt_from_json(raw, where=f"the receipt of {key}")
                for key, raw in self.by_key.items()]


def _copy(state: JournalState) -> JournalState:
    """A copy callers may change freely (receipts and records are never changed in place)."""
    return JournalState(by_key=dict(state.by_key), dangling=dict(state.dangling),
                        max_token=state.max_token)


TAIL_BYTES = 64
"""How many bytes before the end of the last read are compared before reading on from there."""


@dataclass(frozen=True)
class _ReadMark:
    """Where the last read ended: the file (device, inode), the byte offset just past its last
    complete line, the ``TAIL_BYTES`` before that offset, and how many lines it held."""

    device: int
    inode: int
    offset: int
    tail: bytes
    lines: int


LAST_READS = 8
"""How many journals' last reads a process keeps (least recently read dropped first): a worker
that drives one workspace in many short batches, each with a new adapter object, reads on from
where the previous batch stopped instead of from the first line."""

_LAST_READ: OrderedDict[tuple[str, str], tuple[JournalState, _ReadMark]] = OrderedDict()


class ReceiptJournal:
    """The journal file of one workspace; callers hold the workspace lock around every call.

    Args:
        path: the journal file (``<root>/.ratchet/journal.jsonl``).
        instance_id: the workspace's id, carried by every corruption error.
        namespace: the receipt namespace, ``"workspace:<instance id>"``.
        adapter_version: the receipt format tag, ``"ratchet-workspace/1"``.
    """

    def __init__(self, path: Path, *, instance_id: str, namespace: str,
                 adapter_version: str) -> None:
        self.path = path
        self._instance_id = instance_id
        self._namespace = namespace
        self._adapter_version = adapter_version
        self._cache_key = (os.path.realpath(path), instance_id)

    def ensure_exists(self) -> None:
        """Create the empty journal (and fsync its directory) if it is not there yet."""
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            fsync_dir(self.path.parent)

    def append(self, record: Record) -> None:
        """Append ``record`` as one canonical-JSON line and fsync it before returning."""
        line = canonical_json(record) + b"\n"
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o644)
        try:
            write_all(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def prepare(self, change: FileChange, *, idempotency_key: str, intent_digest: str,
                fencing_token: int, approval_digest: str | None, tmp: str | None,
                pre: Entry | None, post: Entry | None) -> Record:
        """Append and fsync the ``prepared`` record of a write about to happen; return it.

        Args:
            change: the validated write or delete.
            idempotency_key, intent_digest, fencing_token, approval_digest: the call's arguments.
            tmp: the relative path of the temp file the write will rename, None for a delete.
            pre, post: the target's entry before and after the write (None = absent).
        """
        prepared: Record = {
            "type": "prepared",
            "key": idempotency_key,
            "intent_digest": intent_digest,
            "fencing_token": fencing_token,
            "approval_digest": approval_digest,
            "op": change.op,
            "path": change.path,
            "content": change.content,
            "executable": change.executable,
            "tmp": tmp,
            "pre": pre,
            "post": post,
            "at": _now().isoformat(),
        }
        self.append(prepared)
        return prepared

    def commit(self, journal: JournalState, prepared: Record, *, recovered: bool,
               committed_at: datetime | None = None) -> Receipt:
        """Append and fsync the ``committed`` record for ``prepared``; return its receipt.

        ``committed_at`` (aware UTC) is the receipt's commit time; None: this process's clock now.

        The receipt is numbered after the receipts ``journal`` holds, and ``journal`` is
        updated to hold it.
        """
        receipt = self._receipt(prepared, number=journal.count + 1,
                                committed_at=committed_at or _now(), recovered=recovered)
        stored = receipt.model_dump(mode="json")
        self.append({"type": "committed", "key": prepared["key"], "receipt": stored})
        # The bytes a later read of this line keeps, so a kept read and a fresh one agree.
        journal.by_key[prepared["key"]] = canonical_json(stored)
        journal.dangling.pop(prepared["key"], None)
        return receipt

    def recover(self, root: Path, *, full: bool = False) -> JournalState:
        """Load the journal and settle interrupted writes against ``root`` (module docstring).

        Args:
            full: read and check every line, not only those appended since the last read.

        Raises:
            AdapterStoreCorruptError: as for :meth:`load`.
        """
        journal = self.load(full=full)
        for key, prepared in list(journal.dangling.items()):
            if isinstance(prepared.get("tmp"), str):
                remove_leftover(root, prepared["tmp"])
            current = current_entry(root, prepared["path"])
            if current == prepared["post"]:
                self.commit(journal, prepared, recovered=True)
            elif current == prepared["pre"]:
                self.append({"type": "aborted", "key": key, "at": _now().isoformat(),
                             "reason": "interrupted before the commit point; target unchanged"})
                del journal.dangling[key]
        return journal

    def load(self, *, full: bool = False) -> JournalState:
        """Read and replay the journal, truncating a torn last line first: only the lines
        appended since the last read when that read can be trusted (module docstring), every
        line when ``full``.

        Raises:
            AdapterStoreCorruptError: the journal is missing, a line is not a JSON record, or
                the records do not follow the prepared -> committed/aborted protocol.
        """
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            raise self._corrupt("the receipt journal is missing") from None
        with handle:
            st = os.fstat(handle.fileno())
            kept = None if full else self._resume_point(handle, st)
            if kept is None:
                state, start, first, before = JournalState(), 0, 0, b""
            else:
                state, start, first, before = _copy(kept[0]), kept[1].offset, kept[1].lines, kept[1].tail
            handle.seek(start)
            data = handle.read()
        try:
            records, torn = self._parse(data, first_line=first)
            self._replay(records, state, first_line=first)
        except AdapterStoreCorruptError:
            # Fail closed from here on: no later call may read on from a read kept before the
            # corruption was seen (a full read found what an incremental one could not).
            _LAST_READ.pop(self._cache_key, None)
            raise
        if torn is not None:
            # Killed mid-append: the partial line was never acknowledged to anyone.
            os.truncate(self.path, start + torn)
            fd = os.open(self.path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        used = data if torn is None else data[:torn]
        _LAST_READ[self._cache_key] = (_copy(state), _ReadMark(
            device=st.st_dev, inode=st.st_ino, offset=start + len(used), tail=(before + used)[-TAIL_BYTES:],
            lines=first + len(records)))
        _LAST_READ.move_to_end(self._cache_key)
        while len(_LAST_READ) > LAST_READS:
            _LAST_READ.popitem(last=False)
        return state

    def _resume_point(self, handle: Any, st: os.stat_result) -> tuple[JournalState, _ReadMark] | None:
        """The last read's state and mark when the open file is the one it read, no shorter,
        and the bytes before the mark are unchanged; else None (read from the first line)."""
        last = _LAST_READ.get(self._cache_key)
        if last is None:
            return None
        state, mark = last
        if (st.st_dev, st.st_ino) != (mark.device, mark.inode) or st.st_size < mark.offset:
            return None
        handle.seek(mark.offset - len(mark.tail))
        return (state, mark) if handle.read(len(mark.tail)) == mark.tail else None

    def _receipt(self, prepared: Record, *, number: int, committed_at: datetime,
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
            "namespace": self._namespace,
            "adapter_version": self._adapter_version,
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
        return receipt_from_json(canonical_json(body),
                                 where=f"{self.path.parent.name}/{self.path.name}")

    def _corrupt(self, message: str, **context: Any) -> AdapterStoreCorruptError:
        return AdapterStoreCorruptError(message, instance_id=self._instance_id, **context)

    def _parse(self, data: bytes, *, first_line: int) -> tuple[list[Record], int | None]:
        """Parsed records of ``data`` (whole lines read from a line start; ``first_line``
        lines precede it) and, if its last line is torn, the offset in ``data`` to truncate at."""
        lines = data.split(b"\n")
        tail = lines.pop()
        torn = len(data) - len(tail) if tail else None
        records = []
        for number, line in enumerate(lines, first_line + 1):
            try:
                record = json.loads(line)
            except ValueError:
                raise self._corrupt("a journal line is not JSON", line=number) from None
            if not isinstance(record, dict) or not isinstance(record.get("key"), str):
                raise self._corrupt("a journal line is not a record", line=number)
            records.append(record)
        return records, torn

    def _replay(self, records: list[Record], journal: JournalState, *, first_line: int) -> None:
        """Apply ``records`` (lines ``first_line + 1`` on) to ``journal``, checking the
        prepared -> committed/aborted protocol against what it already holds."""
        for number, record in enumerate(records, first_line + 1):
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
                raw = canonical_json(record.get("receipt"))
                receipt = receipt_from_json(raw, where=f"journal line {number}")
                if receipt.idempotency_key != key:
                    raise self._corrupt("committed receipt carries another key", line=number)
                journal.by_key[key] = raw
            elif kind == "aborted":
                if journal.dangling.pop(key, None) is None:
                    raise self._corrupt("aborted record without a prepared one", line=number)
            else:
                raise self._corrupt("unknown journal record type", line=number)
