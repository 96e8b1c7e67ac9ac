"""The run trace: append-only, hash-chained evidence (DESIGN.md sections 1, 6 and 8).

Each event stores ``prev_hash`` (the previous event's hash, or a genesis value derived from the
run id) and its own ``hash``, a typed digest (``DigestKind.TRACE``) over::

    {run_id, seq, event_type, payload, environment_version, created_at, prev_hash}

Editing an event breaks its hash; deleting or reordering events breaks the ``seq`` run or the
``prev_hash`` links. A chain alone cannot notice its *last* event being deleted, so the newest
``seq``/``hash`` are also kept on the ``Run`` row (``trace_seq``, ``trace_head``) and checked.

Appends for one run are serialised by locking the ``Run`` row (``select_for_update``; SQLite's
IMMEDIATE transactions serialise writers anyway), so two writers can never fork the chain.

The checkpoint commit appends its events without a read-modify-write of the head: it builds the
rows on the head it last saw (:func:`trace_rows_build`) and moves ``trace_seq``/``trace_head`` in
the same compare-and-set ``UPDATE`` of the run row that fences the commit (DESIGN.md section 4).

Every append is counted (``runtime.observability.metrics``, DESIGN.md section 8.1) in its own transaction:
``trace_append_txn`` counts its event, and a commit's rows built by :func:`trace_rows_build` are
counted when the commit moves the head over them (:func:`trace_head_remember`, called once per
commit inside its transaction; a batch built on a stale head and rebuilt is counted once). The
same two places hand each event to the listeners of :mod:`runtime.evidence.listeners`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import router, transaction
from django.db.models.functions import Now
from django.utils import timezone

from runtime.core.canonical import DigestKind, canonical_json, digest
from runtime.database.statements import compiled_insert, compiled_rows, compiled_update
from runtime.errors import RunNotFoundError, TraceChainError
from runtime.evidence.listeners import AppendedEvent, trace_listeners_notify
from runtime.evidence.search_terms import search_terms_record
from runtime.models import Run, TraceEvent
from runtime.observability.metrics import metrics_events_count, metrics_labels_remember

_HEADS: dict[str, tuple[int, str]] = {}
"""run id -> the trace ``(seq, head)`` this process last wrote: a compare-and-set hint for the
checkpoint commit, never trusted (a stale hint only costs the commit one locked read)."""

_BUILT: dict[str, tuple[int, str, list[tuple[str, dict[str, Any]]]]] = {}
"""run id -> the newest batch :func:`trace_rows_build` built: ``(seq, head)`` after it, events."""


def trace_head_hint(run_id: str) -> tuple[int, str] | None:
    """The trace head this process last wrote for ``run_id`` (a hint), or None."""
    return _HEADS.get(run_id)


def trace_head_remember(run_id: str, seq: int, head: str) -> None:
    """Record the trace head this process just wrote (its transaction may still roll back: the
    hint is checked by compare-and-set before use).

    Called inside the transaction that moved the head: when the head is the one the newest
    batch of :func:`trace_rows_build` leads to, that batch's events are counted here, in that
    transaction (``runtime.observability.metrics``; DESIGN.md section 8.1).
    """
    _HEADS[run_id] = (seq, head)
    built = _BUILT.pop(run_id, None)
    if built is not None and built[0] == seq and built[1] == head:
        metrics_events_count(run_id=run_id, events=built[2])
        search_terms_record(run_id=run_id, events=built[2])  # the dashboard's search (section 6.8)
        first = seq - len(built[2]) + 1
        for offset, (event_type, payload) in enumerate(built[2]):
            trace_listeners_notify(event=AppendedEvent(run_id=run_id, seq=first + offset,
                                                       event_type=event_type, payload=payload))


def trace_head_forget(run_id: str) -> None:
    """Drop the hint (the transaction that moved the head rolled back)."""
    _HEADS.pop(run_id, None)
    _BUILT.pop(run_id, None)


def genesis_hash(run_id: str) -> str:
    """``prev_hash`` of a run's first event: fixed per run, so chains of two runs never splice."""
    return digest(DigestKind.TRACE, {"genesis": run_id})


def event_hash(
    *,
    run_id: str,
    seq: int,
    event_type: str,
    payload: Mapping[str, Any],
    environment_version: str,
    created_at: datetime,
    prev_hash: str,
) -> str:
    """Hash of one trace event (``sha256:<hex>``); ``created_at`` must be timezone-aware.

    Raises:
        CanonicalizationError: ``payload`` is not canonical-JSON serialisable.
    """
    return digest(
        DigestKind.TRACE,
        {
            "run_id": run_id,
            "seq": seq,
            "event_type": event_type,
            "payload": dict(payload),
            "environment_version": environment_version,
            "created_at": created_at.astimezone(UTC).isoformat(),
            "prev_hash": prev_hash,
        },
    )


def trace_events_check(
    *, events: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[tuple[str, dict[str, Any]]]:
    """Validate trace events before anything is written; return them as ``(type, dict)`` pairs.

    Callers that append events together with a checkpoint check them first, so a bad event
    never leaves a checkpoint half committed (DESIGN.md section 4).

    Args:
        events: ``(event_type, payload)`` pairs; types are 1-64 characters, payloads JSON objects.

    Raises:
        ValueError: an event type is not a string of 1-64 characters.
        CanonicalizationError: a payload is not canonical-JSON serialisable.
    """
    checked = []
    for event_type, payload in events:
        if not isinstance(event_type, str) or not 1 <= len(event_type) <= 64:
            raise ValueError("trace event types are strings of 1-64 characters")
        body = dict(payload)
        canonical_json(body)  # raises CanonicalizationError before anything is written
        checked.append((event_type, body))
    return checked


def trace_rows_build(
    *,
    run_id: str,
    seq: int,
    head: str,
    events: Sequence[tuple[str, Mapping[str, Any]]],
    environment_version: str,
) -> tuple[list[TraceEvent], int, str]:
    """Unsaved trace rows for ``events`` chained after ``(seq, head)``; and the new ``(seq, head)``.

    Each payload is encoded once, inside its event hash. The caller inserts the rows and moves
    the run row's head from ``(seq, head)`` to the returned one in one transaction, with a
    compare-and-set on the old head (``runtime.checkpoints.protocol``).

    Args:
        run_id: the run.
        seq, head: the run row's ``trace_seq`` and ``trace_head`` the events follow.
        events: ``(event_type, payload)`` pairs (checked by :func:`trace_events_check`).
        environment_version: recorded on every event.

    Raises:
        CanonicalizationError: a payload is not canonical-JSON serialisable (nothing built).
    """
    created_at = timezone.now()
    prev_hash = head or genesis_hash(run_id)
    rows = []
    for event_type, payload in events:
        seq += 1
        body = dict(payload)
        event_digest = event_hash(run_id=run_id, seq=seq, event_type=event_type, payload=body,
                                  environment_version=environment_version,
                                  created_at=created_at, prev_hash=prev_hash)
        rows.append(TraceEvent(run_id=run_id, seq=seq, event_type=event_type, payload=body,
                               environment_version=environment_version, created_at=created_at,
                               prev_hash=prev_hash, hash=event_digest))
        prev_hash = event_digest
    new_head = prev_hash if rows else head
    _BUILT[run_id] = (seq, new_head, [(row.event_type, row.payload) for row in rows])
    return rows, seq, new_head


def trace_append_txn(
    *, run_id: str, event_type: str, payload: Mapping[str, Any], environment_version: str = ""
) -> TraceEvent:
    """Append one event inside the caller's transaction (STYLE.md rule 7).

    The caller must hold the ``Run`` row lock (``select_for_update`` or an ``UPDATE`` of the row in
    the same transaction), otherwise two appends could pick the same ``seq``; the unique
    ``(run, seq)`` constraint would then fail one of them rather than fork the chain.

    Args:
        run_id: the run.
        event_type: short dotted name, at most 64 chars, e.g. ``"checkpoint.committed"``.
        payload: JSON object (canonical-JSON serialisable); never key material.
        environment_version: the environment version the event refers to, or ``""``.

    Raises:
        CanonicalizationError: the payload is not canonical-JSON serialisable (nothing written).
        RunNotFoundError: no such run.
        ValueError: empty or over-long ``event_type``.
    """
    if not event_type or len(event_type) > 64:
        raise ValueError("event_type must be 1-64 characters")
    body = dict(payload)
    canonical_json(body)  # fail before touching the database
    # Compiled once per process (here and below): leases, recoveries and approvals append
    # events outside the commit path, several per run a worker picks up.
    heads = compiled_rows(
        alias=router.db_for_write(Run), shape=("trace_head_read",),
        build=lambda s: Run.objects.filter(run_id=s["run_id"]).values_list(
            "trace_seq", "trace_head", "tenant_id", "task_id", "phase")[:1],
        slots={"run_id": run_id})
    if not heads:
        raise RunNotFoundError(run_id=run_id)
    trace_seq, trace_head, tenant_id, task_id, phase = heads[0]
    metrics_labels_remember(run_id, tenant_id, task_id)
    # The head anchored on the run row, not the newest stored event, decides what comes next: if
    # the last event was deleted, the next append must not quietly close the gap.
    seq = trace_seq + 1
    prev_hash = trace_head or genesis_hash(run_id)
    # Microseconds are what both databases keep; the hash must cover exactly what is stored.
    created_at = timezone.now()
    event = TraceEvent(
        run_id=run_id,
        seq=seq,
        event_type=event_type,
        payload=body,
        environment_version=environment_version,
        created_at=created_at,
        prev_hash=prev_hash,
        hash=event_hash(
            run_id=run_id,
            seq=seq,
            event_type=event_type,
            payload=body,
            environment_version=environment_version,
            created_at=created_at,
            prev_hash=prev_hash,
        ),
    )
    compiled_insert(alias=router.db_for_write(TraceEvent), objs=[event])
    compiled_update(alias=router.db_for_write(Run), shape=("trace_head_write",),
                    build=lambda s: (Run.objects.filter(run_id=s["run_id"]),
                                     {"trace_seq": s["seq"], "trace_head": s["head"],
                                      "updated_at": Now()}),
                    slots={"run_id": run_id, "seq": seq, "head": event.hash})
    _HEADS[run_id] = (seq, event.hash)
    _BUILT.pop(run_id, None)
    metrics_events_count(run_id=run_id, events=[(event_type, body)], phase_before=phase)
    search_terms_record(run_id=run_id, events=[(event_type, body)])
    trace_listeners_notify(event=AppendedEvent(run_id=run_id, seq=seq, event_type=event_type, payload=body))
    return event


def trace_append(
    *, run_id: str, event_type: str, payload: Mapping[str, Any], environment_version: str = ""
) -> TraceEvent:
    """Append one event in its own transaction, locking the run row first.

    Args and raises: as :func:`trace_append_txn`.
    """
    with transaction.atomic():
        if not Run.objects.select_for_update().filter(run_id=run_id).exists():
            raise RunNotFoundError(run_id=run_id)
        return trace_append_txn(
            run_id=run_id,
            event_type=event_type,
            payload=payload,
            environment_version=environment_version,
        )


@dataclass(frozen=True)
class ChainReport:
    """Result of :func:`trace_verify`.

    Attributes:
        ok: the whole chain verifies.
        count: number of events read.
        first_bad_seq: ``seq`` of the first event that does not verify (or the expected ``seq`` of a
            missing one); ``None`` when ``ok``.
        reason: human-readable reason; ``""`` when ``ok``.
    """

    ok: bool
    count: int
    first_bad_seq: int | None
    reason: str

    def raise_for_status(self, *, run_id: str) -> None:
        """Raise :class:`TraceChainError` naming the run and first bad ``seq`` unless ``ok``."""
        if not self.ok:
            raise TraceChainError(self.reason, run_id=run_id, seq=self.first_bad_seq)


def trace_verify(*, run_id: str) -> ChainReport:
    """Re-hash a run's trace and check the chain links and the head anchored on the run row.

    Detects edited events (hash mismatch), deleted or inserted events (``seq`` gap or
    ``prev_hash`` mismatch), reordered events (the hash covers ``seq``) and a deleted tail (the
    run row's ``trace_seq``/``trace_head`` no longer match the last event).

    Raises:
        RunNotFoundError: no such run.
    """
    # Lock the run row so no append lands between reading the head and reading the events.
    with transaction.atomic():
        head = (
            Run.objects.select_for_update()
            .filter(run_id=run_id)
            .values("trace_seq", "trace_head")
            .first()
        )
        if head is None:
            raise RunNotFoundError(run_id=run_id)
        events = list(TraceEvent.objects.filter(run_id=run_id).order_by("seq"))
    expected_prev = genesis_hash(run_id)
    count = 0
    for count, event in enumerate(events, start=1):
        if event.seq != count:
            return ChainReport(
                False, count, count, f"event seq {count} is missing (found seq {event.seq})"
            )
        if event.prev_hash != expected_prev:
            return ChainReport(
                False,
                count,
                event.seq,
                f"event seq {event.seq} does not link to the event before it",
            )
        recomputed = event_hash(
            run_id=run_id,
            seq=event.seq,
            event_type=event.event_type,
            payload=event.payload,
            environment_version=event.environment_version,
            created_at=event.created_at,
            prev_hash=event.prev_hash,
        )
        if recomputed != event.hash:
            return ChainReport(
                False, count, event.seq, f"event seq {event.seq} was altered after it was written"
            )
        expected_prev = event.hash
    if head["trace_seq"] > count:
        return ChainReport(
            False,
            count,
            count + 1,
            f"events after seq {count} were deleted: the run's trace head is "
            f"seq {head['trace_seq']}",
        )
    if head["trace_seq"] < count:
        return ChainReport(
            False,
            count,
            head["trace_seq"] + 1,
            f"events after seq {head['trace_seq']} were added behind the runtime's back",
        )
    if count and head["trace_head"] != expected_prev:
        return ChainReport(
            False, count, count, f"event seq {count} is not the head the run recorded"
        )
    return ChainReport(True, count, None, "")
