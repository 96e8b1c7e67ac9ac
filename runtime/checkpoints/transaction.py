"""The transaction(s) of one checkpoint advance (DESIGN.md section 4.3).

``runtime.checkpoints.protocol.checkpoint_commit`` prepares a :class:`CommitPlan` (sealed envelope,
hashed ledger entries, trace events) and :func:`commit_plan_apply` writes it: one transaction on
the main database, the commit point, then the mark's compare-and-set in the mark's own database
(always a database of its own, section 4.2), which ``runtime.checkpoints.mark_completion``
finishes if the writer dies in between. Split from ``runtime.checkpoints.protocol`` so each
module stays one concept: that one is the protocol's services and restore, this one its write path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, IntegrityError, connections, router, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, QuerySet
from django.db.models.functions import Now

from runtime.checkpoints.checks import run_identity_check, run_load
from runtime.checkpoints.high_water_marks import hwm_advance
from runtime.checkpoints.ledger import ledger_orphans_drop, ledger_rows_add
from runtime.core.checkpoint import LedgerHead
from runtime.core.crashpoints import crash_point, register
from runtime.core.envelope import CheckpointEnvelope
from runtime.core.ledger import LedgerEntry
from runtime.database.commit_writes import RowsInsert, RowUpdate
from runtime.database.pipeline import batch_rollback, pipelined
from runtime.database.statements import (
    NotBatchableError,
    UpdateBuilder,
    compiled_insert,
    compiled_update,
    compiled_update_cached,
    compiled_update_sent,
)
from runtime.errors import (
    CheckpointInvariantError,
    HighWaterMarkMissingError,
    LeaseLostError,
    MarkPendingError,
    RunNotFoundError,
    StaleGenerationError,
)
from runtime.evidence.trace import trace_head_forget, trace_head_hint, trace_head_remember, trace_rows_build
from runtime.models import Checkpoint, Run, TraceEvent
from runtime.ownership.leases import Lease, held_by

AFTER_LEDGER_ROWS = register(
    "checkpoint.after_ledger_rows",
    "the ledger entries of g+1 are inserted, its checkpoint row is not; nothing committed",
)
AFTER_APPEND = register(
    "checkpoint.after_append",
    "checkpoint g+1 and its ledger entries are inserted in the open transaction; nothing "
    "committed, the HWM still says g",
)
BEFORE_HWM_CAS = register(
    "checkpoint.before_hwm_cas",
    "the main transaction committed g+1 (the commit point), the mark still says g",
)
AFTER_COMMIT = register(
    "checkpoint.after_commit",
    "generation g+1 is committed (checkpoint, ledger entries, HWM, trace); the caller has not "
    "seen the result yet",
)
AFTER_HWM_CAS = register(
    "checkpoint.after_hwm_cas",
    "the mark's compare-and-set g -> g+1 committed in its own database",
)


def _explain_fence(lease: Lease, expected_generation: int) -> LeaseLostError | StaleGenerationError:
    """Say why the fence UPDATE matched no row: taken over, state version moved, another
    generation committed, or expired."""
    row = (
        Run.objects.filter(run_id=lease.run_id)
        .values("owner_worker", "lease_version", "state_version", "generation")
        .first()
    )
    context = {"run_id": lease.run_id, "worker": lease.worker, "lease_version": lease.lease_version}
    if row is None:
        return LeaseLostError("cannot commit: the run does not exist", **context)
    if row["owner_worker"] != lease.worker or row["lease_version"] != lease.lease_version:
        return LeaseLostError(
            f"cannot commit: the lease was taken over (now version {row['lease_version']})",
            **context,
        )
    if row["state_version"] != lease.state_version:
        return LeaseLostError(
            f"cannot commit: state version is {row['state_version']}, this worker expected "
            f"{lease.state_version}",
            **context,
        )
    if row["generation"] != expected_generation:
        return StaleGenerationError(run_id=lease.run_id, expected_generation=expected_generation,
                                    hwm_generation=row["generation"])
    return LeaseLostError("cannot commit: the lease expired by the database clock", **context)


# --- services -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitPlan:
    """Everything one commit writes, prepared (sealed, hashed) before its transaction opens.

    Attributes: the caller's ``lease``; the sealed ``envelope`` and its unsaved checkpoint
    ``row``; the ledger ``entries`` to insert and the head they extend (``ledger_before``); the
    trace ``events`` and ``env_version``; the HWM's ``expected_generation``; ``renew_seconds``
    to extend the lease by (or None); ``within``: callables run inside the transaction;
    ``release``: the same UPDATE gives the lease up (a run's last commit).
    """

    lease: Lease
    envelope: CheckpointEnvelope
    row: Checkpoint
    entries: list[LedgerEntry]
    events: list[tuple[str, dict[str, Any]]]
    env_version: str
    expected_generation: int
    ledger_before: LedgerHead
    renew_seconds: float | None
    within: tuple[Callable[[], None], ...]
    release: bool = False


_IDENTITY_COLUMNS = ("tenant_id", "task_id", "environment_instance_id", "task_version",
                     "policy_id", "policy_version", "scenario_fingerprint")


def _identity_filter(envelope: CheckpointEnvelope) -> dict[str, str]:
    """The run row columns the envelope must match (``run_identity_check``), as a WHERE clause,
    so the fence UPDATE checks them without a separate SELECT."""
    ident = envelope.payload.identity
    return {"tenant_id": envelope.tenant_id, "task_id": envelope.task_id,
            "environment_instance_id": envelope.environment_instance_id,
            "task_version": ident.task_version, "policy_id": ident.policy_id,
            "policy_version": ident.policy_version,
            "scenario_fingerprint": ident.scenario_fingerprint}


def _fence_changes(renew_seconds: float | None, *, phase: str, stop_reason: str,
                   generation: int, digest: str, release: bool) -> dict[str, Any]:
    """The SET clause of the fence UPDATE besides the trace head: the generation and digest it
    names are what ``runtime.checkpoints.mark_completion`` moves a lagging mark to; ``release`` frees the
    lease as ``runtime.ownership.leases.lease_release`` would (its ``lease_version`` is kept)."""
    changes: dict[str, Any] = {
        "state_version": F("state_version") + 1, "phase": phase, "stop_reason": stop_reason,
        "generation": generation, "checkpoint_digest": digest, "updated_at": Now()}
    if release:
        changes.update(owner_worker="", lease_expires_at=None)
    elif renew_seconds is not None:
        changes["lease_expires_at"] = ExpressionWrapper(
            Now() + timedelta(seconds=renew_seconds), output_field=DateTimeField())
    return changes


def _fence_update(lease: Lease, renew_seconds: float | None, release: bool) -> UpdateBuilder:
    """The hot-path fence UPDATE written with the query API, from its varying values (compiled
    once per shape by ``runtime.database.statements``)."""
    def build(s: Mapping[str, Any]) -> tuple[QuerySet[Any], dict[str, Any]]:
        held = held_by(replace(lease, run_id=s["run_id"], worker=s["worker"],
                               lease_version=s["lease_version"]))
        queryset = Run.objects.filter(
            held, state_version=s["state_version"], generation=s["expected"], trace_seq=s["seq"],
            trace_head=s["head"], **{k: s[k] for k in _IDENTITY_COLUMNS})
        return queryset, {"trace_seq": s["new_seq"], "trace_head": s["new_head"],
                          **_fence_changes(renew_seconds, phase=s["phase"],
                                           stop_reason=s["stop_reason"],
                                           generation=s["generation"], digest=s["digest"],
                                           release=release)}
    return build


def _fence_hot(plan: CommitPlan) -> tuple[list[TraceEvent], int, str, dict[str, Any]] | None:
    """The trace rows, new trace head and fence slot values built on the trace head this process
    last wrote; None when it remembers none. Raises ValueError: ``renew_seconds`` is not > 0."""
    if plan.renew_seconds is not None and not plan.renew_seconds > 0:
        raise ValueError("renew_seconds must be > 0")
    lease, envelope = plan.lease, plan.envelope
    hint = trace_head_hint(lease.run_id)
    if hint is None:
        return None
    seq, head = hint
    rows, new_seq, new_head = trace_rows_build(run_id=lease.run_id, seq=seq, head=head,
                                               events=plan.events,
                                               environment_version=plan.env_version)
    payload = envelope.payload
    slots = {"run_id": lease.run_id, "worker": lease.worker, "lease_version": lease.lease_version,
             "state_version": lease.state_version, **_identity_filter(envelope),
             "seq": seq, "head": head, "new_seq": new_seq, "new_head": new_head,
             "phase": payload.phase.value,
             "stop_reason": payload.stop_reason.value if payload.stop_reason else "",
             "generation": envelope.generation, "digest": plan.row.digest,
             "expected": plan.expected_generation}
    return rows, new_seq, new_head, slots


def _fence(plan: CommitPlan) -> list[TraceEvent]:
    """The one run-row UPDATE of a commit: lease fence, identity, state-version CAS, the
    generation the caller extends (so a stale ``expected_generation`` writes nothing), phase and
    generation mirrors, and the trace head moved over this commit's events (compare-and-set on
    the head this process last saw). Returns the trace rows to insert.

    Hot path: one statement. When the remembered trace head is stale (another service appended
    an event) or the fence fails, the slow path reads the row once under a lock and either
    rebuilds the events on the real head or explains the failure.
    """
    lease, envelope = plan.lease, plan.envelope
    run_id = lease.run_id
    payload = envelope.payload
    hot = _fence_hot(plan)
    if hot is not None:
        rows, new_seq, new_head, slots = hot
        if compiled_update(alias=router.db_for_write(Run),
                           shape=("fence", plan.renew_seconds, plan.release),
                           build=_fence_update(lease, plan.renew_seconds, plan.release),
                           slots=slots) == 1:
            trace_head_remember(run_id, new_seq, new_head)
            return rows
    events, env_version = plan.events, plan.env_version
    changes = _fence_changes(plan.renew_seconds, phase=payload.phase.value,
                             stop_reason=payload.stop_reason.value if payload.stop_reason else "",
                             generation=envelope.generation, digest=plan.row.digest,
                             release=plan.release)
    fence = Run.objects.filter(held_by(lease), state_version=lease.state_version,
                               generation=plan.expected_generation, **_identity_filter(envelope))
    current = (Run.objects.select_for_update().filter(run_id=run_id)
               .values("trace_seq", "trace_head").first())
    if current is None:
        raise RunNotFoundError(run_id=run_id)
    rows, new_seq, new_head = trace_rows_build(
        run_id=run_id, seq=current["trace_seq"], head=current["trace_head"], events=events,
        environment_version=env_version)
    if fence.update(trace_seq=new_seq, trace_head=new_head, **changes) != 1:
        trace_head_forget(run_id)
        run_identity_check(run=run_load(run_id=run_id), envelope=envelope)
        raise _explain_fence(lease, plan.expected_generation)
    trace_head_remember(run_id, new_seq, new_head)
    return rows


def _main_transaction(plan: CommitPlan) -> None:
    """The main database's transaction of an advance (DESIGN.md section 4.3): fence UPDATE (which
    also names g+1 and its digest on the run row), the engine's rows, uncovered ledger rows
    dropped, ledger rows, checkpoint row, trace rows. Its COMMIT is the commit point."""
    lease, envelope, row = plan.lease, plan.envelope, plan.row
    if _main_transaction_pipelined(plan):
        return
    try:
        with transaction.atomic():
            trace_rows = _fence(plan)
            for write in plan.within:
                write()
            # The fence UPDATE holds the row (and SQLite's BEGIN IMMEDIATE the database), so
            # nobody else can commit: entries beyond the head this state extends belong to no
            # committed checkpoint (left by a release that committed them apart; runtime.checkpoints.ledger).
            ledger_orphans_drop(run_id=lease.run_id, committed_length=plan.ledger_before.length)
            ledger_rows_add(run_id=lease.run_id, entries=plan.entries, generation=envelope.generation)
            crash_point(AFTER_LEDGER_ROWS)
            # ignore_conflicts: a retried commit of the very same bytes reuses its row (the row is
            # content-addressed by (run, digest)); one INSERT, no SELECT first.
            compiled_insert(alias=router.db_for_write(Checkpoint), objs=[row], ignore_conflicts=True)
            crash_point(AFTER_APPEND)
            compiled_insert(alias=router.db_for_write(TraceEvent), objs=trace_rows)
    except IntegrityError:
        trace_head_forget(lease.run_id)
        raise _ledger_conflict(lease, plan.ledger_before) from None
    except BaseException:
        trace_head_forget(lease.run_id)  # the UPDATE that moved it rolled back
        raise


def _main_transaction_pipelined(plan: CommitPlan) -> bool:
    """The main transaction in two round trips on PostgreSQL (DESIGN.md section 4.13).

    The statements of :func:`_main_transaction`, in its order and with its crash points, then
    the engine's rows (``within``), go out as one batch (``runtime.database.pipeline``) opened
    by a ``BEGIN`` said in SQL (psycopg would wait for a ``BEGIN`` of its own) and ended by one
    Sync; then ``COMMIT`` (the commit point) or ``ROLLBACK``. The batch cannot look at the fence
    before the INSERTs behind it run, so a fence that matched no row, an exclusive row already
    there, or any failure rolls it all back and returns False: the statement-by-statement path
    then commits or raises the same typed error as before.

    Returns True when committed; False when nothing was written (not PostgreSQL, inside a
    caller's transaction, nothing compiled yet, a write that is no plain INSERT, rolled back).
    """
    lease, envelope, alias = plan.lease, plan.envelope, router.db_for_write(Run)
    connection = connections[alias]
    if (connection.vendor != "postgresql" or connection.in_atomic_block
            or not connection.get_autocommit()
            or any(router.db_for_write(model) != alias for model in (Checkpoint, TraceEvent))
            or not all(isinstance(w, RowsInsert | RowUpdate) and w.alias == alias and w.batchable()
                       for w in plan.within)):
        return False
    hot = _fence_hot(plan)
    if hot is None:
        return False
    trace_rows, new_seq, new_head, slots = hot
    shape = ("fence", plan.renew_seconds, plan.release)
    if not compiled_update_cached(alias=alias, shape=shape, slots=slots):
        return False  # the first commit of this shape compiles and checks the fence UPDATE
    sent: list[tuple[Any, int]] = []  # (cursor, rows it must have written)
    began = good = False
    try:
        with pipelined(alias) as batched:
            if batched:
                with connection.cursor() as cursor:
                    cursor.execute("BEGIN")
                began = True
                sent.append((compiled_update_sent(alias=alias, shape=shape, slots=slots), 1))
                ledger_orphans_drop(run_id=lease.run_id, committed_length=plan.ledger_before.length)
                ledger_rows_add(run_id=lease.run_id, entries=plan.entries, generation=envelope.generation)
                crash_point(AFTER_LEDGER_ROWS)
                compiled_insert(alias=alias, objs=[plan.row], ignore_conflicts=True)
                crash_point(AFTER_APPEND)
                compiled_insert(alias=alias, objs=trace_rows)
                for write in plan.within:
                    cursor = write.send()
                    if write.expected_rows is not None:
                        sent.append((cursor, write.expected_rows))
                # The trace's derived rows (search terms, metrics) in this transaction, as always.
                trace_head_remember(lease.run_id, new_seq, new_head)
        # The Sync returned every result of the batch: the rowcounts are known.
        good = began and all(cursor is not None and cursor.rowcount == rows for cursor, rows in sent)
    except (DatabaseError, NotBatchableError):
        good = False  # nothing committed: the statement-by-statement path decides or raises
    except BaseException:
        trace_head_forget(lease.run_id)
        if began:
            batch_rollback(alias)
        raise
    finally:
        for cursor, _rows in sent:
            if cursor is not None:
                cursor.close()
    if not good:  # nothing committed; the slow path reads the real trace head
        trace_head_forget(lease.run_id)
        if began:
            batch_rollback(alias)
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")  # the commit point
    except BaseException:
        trace_head_forget(lease.run_id)
        raise
    return True


def _mark_advance(plan: CommitPlan) -> None:
    crash_point(BEFORE_HWM_CAS)
    hwm_advance(run=_hwm_run(plan.envelope), expected=plan.expected_generation,
                generation=plan.envelope.generation, digest=plan.row.digest)
    crash_point(AFTER_HWM_CAS)


def _hwm_run(envelope: CheckpointEnvelope) -> Run:
    # The HWM scope columns only (never saved): the fence already matched them to the run row.
    return Run(run_id=envelope.run_id, task_id=envelope.task_id,
               environment_instance_id=envelope.environment_instance_id)


def _ledger_conflict(lease: Lease, before: LedgerHead) -> CheckpointInvariantError:
    return CheckpointInvariantError(
        f"a ledger entry after entry {before.length} is already stored (a key executed twice, a "
        "nonce consumed twice, or entries nobody's checkpoint covers): nothing committed",
        run_id=lease.run_id)


def commit_plan_apply(plan: CommitPlan) -> None:
    """Write ``plan``: one transaction on the main database (the commit point), then the mark's
    compare-and-set in its own database.

    Raises:
        LeaseLostError: the fence failed (taken over, expired, state version moved on).
        IdentityMismatchError / ScenarioMismatchError: the envelope is not this run's.
        StaleGenerationError: the run row is not at the generation the plan extends (the fence
            refuses it); nothing committed.
        MarkPendingError: the main transaction committed g+1 and the mark could not be moved; the
            next restore completes it
            (``runtime.checkpoints.mark_completion``). A StaleGenerationError there means another holder
            has moved the run on since.
        CheckpointInvariantError: a ledger entry's ``seq`` or ``(kind, key)`` is already stored.
        RunNotFoundError: no such run.
    """
    _main_transaction(plan)
    # The mark in its own database (DESIGN.md section 4.2): its compare-and-set after the commit
    # point. A crash here leaves the mark one behind the run row, and
    # runtime.checkpoints.mark_completion moves it before anything reads it as committed.
    try:
        _mark_advance(plan)
    except HighWaterMarkMissingError as exc:
        raise MarkPendingError(
            f"generation {plan.envelope.generation} is committed on the main database, but its "
            f"high-water mark could not be moved: {exc.message}",
            run_id=plan.lease.run_id, generation=plan.envelope.generation) from None
