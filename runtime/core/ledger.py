"""The receipts ledger, framework-free: entry kinds, chain hashing and the engine's view of it
(DESIGN.md section 3.1).

Everything about a run that grows with the run -- executed writes with their receipts, consumed
approval and decision nonces, quarantined idempotency keys -- lives outside the signed checkpoint
in an append-only ledger of entries. Entry ``seq`` (1, 2, ...) of run ``R`` has::

    entry_hash = digest(LEDGER, {run_id, seq, kind, key, body: sha256(body bytes), prev_hash})

where ``body`` is the entry's canonical JSON, stored as written, and ``prev_hash`` is the hash of
entry ``seq - 1`` (or :func:`ledger_genesis` of the run for the first). The checkpoint commits to
the ledger by ``LedgerHead(length, head)``: editing, dropping, reordering or truncating entries
breaks the chain or no longer ends at the signed head.

Public entry points:
    :class:`LedgerKind`, :class:`LedgerEntry`   what an entry is.
    :func:`ledger_genesis`, :func:`ledger_entry_hash`, :func:`ledger_chain_check`  chain hashing.
    :class:`LedgerView` / :func:`state_ledger`  the engine's lookups and appends for one state.
    :func:`ledger_pending_check`  the pending write's key is neither executed nor quarantined.

This module imports nothing from Django; the rows are ``runtime.checkpoints.ledger``'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from runtime.core.canonical import DigestKind, canonical_json, digest
from runtime.core.checkpoint import ExecutedWrite, LedgerHead, RunState
from runtime.core.denial_evidence import DenialEvidence
from runtime.errors import (
    CheckpointInvariantError,
    LedgerChainError,
    LedgerEntryError,
    LedgerUnavailableError,
)


class LedgerKind(StrEnum):
    """What an entry records; ``key`` is unique per ``(run, kind)``."""

    EXECUTED_WRITE = "executed_write"
    """key: the idempotency key; body: the :class:`ExecutedWrite` with its full receipt."""
    CONSUMED_NONCE = "consumed_nonce"
    """key: an approval or decision nonce that was used; body: ``{"nonce": ...}``."""
    QUARANTINED_KEY = "quarantined_key"
    """key: an idempotency key a reviewer's replan retired; body: ``{"idempotency_key": ...}``."""
    DENIED_WRITE = "denied_write"
    """key: the idempotency key of a write a person denied; body: the signed
    :class:`~runtime.core.denial_evidence.DenialEvidence` (DESIGN.md section 6.14)."""


@dataclass(frozen=True)
class LedgerEntry:
    """One ledger entry as stored: ``body`` is its canonical JSON bytes."""

    seq: int
    kind: LedgerKind
    key: str
    body: bytes
    prev_hash: str
    entry_hash: str


def ledger_genesis(run_id: str) -> str:
    """``prev_hash`` of a run's first entry: fixed per run, so two runs' ledgers never splice."""
    return digest(DigestKind.LEDGER, {"genesis": run_id})


def ledger_entry_hash(*, run_id: str, seq: int, kind: str, key: str, body: bytes,
                      prev_hash: str) -> str:
    """Hash of one entry (``sha256:<hex>``, domain ``LEDGER``).

    The body enters as the SHA-256 of its stored bytes, so verification hashes what is stored and
    never re-encodes it (DESIGN.md section 3.1).
    """
    return digest(DigestKind.LEDGER, {
        "run_id": run_id, "seq": seq, "kind": str(kind), "key": key,
        "body": hashlib.sha256(body).hexdigest(), "prev_hash": prev_hash,
    })


def ledger_chain_check(*, run_id: str, start: LedgerHead, rows: Iterable[LedgerEntry],
                       expected: LedgerHead) -> None:
    """Check that ``rows`` extend the chain at ``start`` to exactly ``expected``.

    Args:
        run_id: the run.
        start: a head already verified (``LedgerHead()`` to verify from the first entry).
        rows: the stored entries ``start.length + 1 .. expected.length`` in ``seq`` order.
        expected: the head the checkpoint signed.

    Raises:
        LedgerChainError: naming the first bad ``seq``: missing, reordered, edited, or the chain
            ends before or elsewhere than ``expected``.
    """
    prev = start.head or ledger_genesis(run_id)
    seq = start.length
    for row in rows:
        seq += 1
        if row.seq != seq:
            raise LedgerChainError(
                f"ledger entry {seq} is missing or out of order (found entry {row.seq})",
                run_id=run_id, seq=seq)
        if row.prev_hash != prev:
            raise LedgerChainError(f"ledger entry {seq} does not link to the entry before it",
                                   run_id=run_id, seq=seq)
        recomputed = ledger_entry_hash(run_id=run_id, seq=row.seq, kind=row.kind, key=row.key,
                                       body=row.body, prev_hash=row.prev_hash)
        if recomputed != row.entry_hash:
            raise LedgerChainError(f"ledger entry {seq} was altered after it was written",
                                   run_id=run_id, seq=seq)
        prev = row.entry_hash
    if seq != expected.length:
        raise LedgerChainError(
            f"the ledger holds {seq} entries where the checkpoint commits to {expected.length}: "
            "entries were truncated or dropped", run_id=run_id, seq=seq + 1)
    if expected.length and prev != expected.head:
        raise LedgerChainError("the ledger's last entry is not the head the checkpoint signed",
                               run_id=run_id, seq=seq)


class LedgerReader(Protocol):
    """Indexed reads of a run's committed entries (``runtime.checkpoints.ledger`` implements it)."""

    def lookup(self, kind: LedgerKind, key: str, *, upto: int) -> bytes | None:
        """Body of the entry ``(kind, key)`` among entries ``1..upto``, or None."""

    def lookup_kinds(self, kinds: tuple[LedgerKind, ...], key: str, *, upto: int) -> dict[LedgerKind, bytes]:
        """Bodies of the entries ``(kind, key)`` for each of ``kinds`` among entries ``1..upto``
        (a kind with no entry is left out): one read for several kinds of one key."""

    def entries(self, *, upto: int, kind: LedgerKind | None = None) -> list[LedgerEntry]:
        """Entries ``1..upto`` (of ``kind``, if given) in ``seq`` order."""


KEY_KINDS = (LedgerKind.EXECUTED_WRITE, LedgerKind.QUARANTINED_KEY, LedgerKind.DENIED_WRITE)
"""The kinds keyed by an idempotency key. A proposed write's key is asked about more than one of
them (quarantined? executed? denied?), so a lookup of one reads all three in one query."""

_Staged = tuple[LedgerKind, str, bytes]


class LedgerView:
    """The engine's view of one run's ledger: committed entries (read through ``reader``) plus
    entries staged for the next checkpoint commit, which writes them in its transaction.

    Lookups are indexed reads (one query per new key, cached: committed entries never change; the
    kinds keyed by an idempotency key, :data:`KEY_KINDS`, are read together);
    appends only stage. ``runtime.checkpoints.protocol`` calls :meth:`chain_staged` to hash the staged
    entries onto the committed head and :meth:`committed` once they are durable.
    """

    def __init__(self, *, run_id: str, head: LedgerHead, reader: LedgerReader | None,
                 staged: Iterable[_Staged] = ()) -> None:
        self.run_id = run_id
        self.head = head
        self.reader = reader
        self.staged: list[_Staged] = list(staged)
        self._cache: dict[tuple[LedgerKind, str], bytes | None] = {}

    def _find(self, kind: LedgerKind, key: str) -> bytes | None:
        for staged_kind, staged_key, body in self.staged:
            if staged_kind == kind and staged_key == key:
                return body
        if (kind, key) in self._cache:
            return self._cache[(kind, key)]
        if self.head.length == 0:
            return None
        if self.reader is None:
            raise LedgerUnavailableError(run_id=self.run_id)
        if kind in KEY_KINDS:
            bodies = self.reader.lookup_kinds(KEY_KINDS, key, upto=self.head.length)
            for each in KEY_KINDS:
                self._cache[(each, key)] = bodies.get(each)
            return bodies.get(kind)
        found = self.reader.lookup(kind, key, upto=self.head.length)
        self._cache[(kind, key)] = found
        return found

    # --- lookups ----------------------------------------------------------------------------

    def executed(self, key: str) -> ExecutedWrite | None:
        """The executed write under idempotency ``key``, or None."""
        body = self._find(LedgerKind.EXECUTED_WRITE, key)
        return None if body is None else ExecutedWrite.model_validate_json(body)

    def nonce_consumed(self, nonce: str) -> bool:
        """Whether an approval or decision ``nonce`` was already used."""
        return self._find(LedgerKind.CONSUMED_NONCE, nonce) is not None

    def key_quarantined(self, key: str) -> bool:
        """Whether idempotency ``key`` was quarantined by a reviewer's replan."""
        return self._find(LedgerKind.QUARANTINED_KEY, key) is not None

    def denied(self, key: str) -> DenialEvidence | None:
        """The signed denial of the write under idempotency ``key``, or None."""
        body = self._find(LedgerKind.DENIED_WRITE, key)
        return None if body is None else DenialEvidence.model_validate_json(body)

    def executed_writes(self) -> list[ExecutedWrite]:
        """Every executed write, committed and staged, in order (reads the whole ledger: for
        audits and bundles, not for the step loop)."""
        committed: list[bytes] = []
        if self.head.length:
            if self.reader is None:
                raise LedgerUnavailableError(run_id=self.run_id)
            committed = [e.body for e in self.reader.entries(upto=self.head.length,
                                                            kind=LedgerKind.EXECUTED_WRITE)]
        staged = [b for k, _, b in self.staged if k == LedgerKind.EXECUTED_WRITE]
        return [ExecutedWrite.model_validate_json(b) for b in (*committed, *staged)]

    # --- appends (staged until the next checkpoint commit) ----------------------------------

    def record_executed(self, write: ExecutedWrite) -> None:
        """Stage an executed write.

        Raises:
            LedgerEntryError: its receipt carries another key or intent, its fingerprint does not
                match the receipt, or the key was already executed or is quarantined.
        """
        key = write.idempotency_key
        if write.receipt.idempotency_key != key:
            raise LedgerEntryError(f"receipt of {key} carries another key", run_id=self.run_id)
        if write.receipt.intent_digest != write.intent_digest:
            raise LedgerEntryError(f"receipt of {key} is for another intent", run_id=self.run_id)
        if write.receipt.fingerprint() != write.receipt_fingerprint:
            raise LedgerEntryError(f"receipt fingerprint of {key} does not match it",
                                   run_id=self.run_id)
        if self.executed(key) is not None:
            raise LedgerEntryError(f"idempotency key {key} was already executed", run_id=self.run_id)
        if self.key_quarantined(key):
            raise LedgerEntryError(f"idempotency key {key} is quarantined", run_id=self.run_id)
        self.staged.append((LedgerKind.EXECUTED_WRITE, key,
                            canonical_json(write.model_dump(mode="json"))))

    def consume_nonce(self, nonce: str) -> None:
        """Stage a consumed nonce.

        Raises:
            LedgerEntryError: the nonce was already consumed.
        """
        if self.nonce_consumed(nonce):
            raise LedgerEntryError("a consumed nonce appears twice", run_id=self.run_id)
        self.staged.append((LedgerKind.CONSUMED_NONCE, nonce, canonical_json({"nonce": nonce})))

    def record_denied(self, evidence: DenialEvidence) -> None:
        """Stage a signed denial under its idempotency key.

        Raises:
            LedgerEntryError: the key was executed or already denied.
        """
        key = evidence.idempotency_key
        if self.executed(key) is not None or self.denied(key) is not None:
            raise LedgerEntryError(f"idempotency key {key} was already executed or denied", run_id=self.run_id)
        self.staged.append((LedgerKind.DENIED_WRITE, key, canonical_json(evidence.model_dump(mode="json"))))

    def quarantine_key(self, key: str) -> None:
        """Stage a quarantined idempotency key (a no-op if it already is)."""
        if not self.key_quarantined(key):
            self.staged.append((LedgerKind.QUARANTINED_KEY, key,
                                canonical_json({"idempotency_key": key})))

    # --- commit support ---------------------------------------------------------------------

    def chain_staged(self) -> tuple[list[LedgerEntry], LedgerHead]:
        """The staged entries hashed onto the committed head, and the head they lead to."""
        prev = self.head.head or ledger_genesis(self.run_id)
        seq = self.head.length
        out = []
        for kind, key, body in self.staged:
            seq += 1
            entry_hash = ledger_entry_hash(run_id=self.run_id, seq=seq, kind=kind, key=key,
                                           body=body, prev_hash=prev)
            out.append(LedgerEntry(seq=seq, kind=kind, key=key, body=body, prev_hash=prev,
                                   entry_hash=entry_hash))
            prev = entry_hash
        return out, (LedgerHead(length=seq, head=prev) if out else self.head)

    def committed(self, head: LedgerHead) -> None:
        """The staged entries are durable up to ``head``: they become committed, cached reads."""
        for kind, key, body in self.staged:
            self._cache[(kind, key)] = body
        self.staged = []
        self.head = head


def state_ledger(state: RunState) -> LedgerView:
    """The ledger view attached to ``state`` (attached by restore); a state whose ledger is still
    empty gets a fresh one.

    Raises:
        LedgerUnavailableError: the state commits to a non-empty ledger but none is attached.
    """
    view = state.ledger_view
    if view is None:
        if state.ledger.length:
            raise LedgerUnavailableError(run_id=state.identity.run_id)
        view = LedgerView(run_id=state.identity.run_id, head=state.ledger, reader=None)
        state.attach_ledger(view)
    return view


def ledger_pending_check(state: RunState) -> None:
    """The pending write's key is neither executed nor quarantined (one indexed read answers both,
    cached for the key; the whole-state invariants cannot see the ledger: DESIGN.md section 3.1).

    Raises:
        CheckpointInvariantError: naming which, with the run id.
        LedgerUnavailableError: the state has a non-empty ledger but none attached.
    """
    pending = state.pending
    if pending is None:
        return
    view = state_ledger(state)
    if view.key_quarantined(pending.idempotency_key):
        raise CheckpointInvariantError("pending action uses a quarantined idempotency key",
                                       run_id=state.identity.run_id)
    if view.executed(pending.idempotency_key) is not None:
        raise CheckpointInvariantError("pending action reuses the key of an executed write",
                                       run_id=state.identity.run_id)
