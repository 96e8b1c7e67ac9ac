"""The transaction(s) of one checkpoint advance (DESIGN.md section 4.3).

``runtime.checkpoints.checkpoint_commit`` prepares a :class:`CommitPlan` (sealed envelope,
hashed ledger entries, trace events) and :func:`commit_plan_apply` writes it: in ONE transaction
when the high-water mark is on the default database, in three (in the order section 4.3
documents) when it has its own. Split from ``runtime.checkpoints`` so each module stays one
concept: that one is the protocol's services and restore, this one its write path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, router, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, QuerySet
from django.db.models.functions import Now

from runtime.checkpoint_checks import run_identity_check, run_load
from runtime.compiled_updates import UpdateBuilder, compiled_insert, compiled_rows, compiled_update
from runtime.core.checkpoint import LedgerHead
from runtime.core.crashpoints import crash_point, register
from runtime.core.envelope import CheckpointEnvelope
from runtime.core.ledger import LedgerEntry
from runtime.errors import CheckpointInvariantError, LeaseLostError, RunNotFoundError
from runtime.high_water_marks import hwm_advance
from runtime.leases import Lease, held_by
from runtime.ledger import ledger_orphans_drop, ledger_rows_add
from runtime.models import Checkpoint, Run, TraceEvent
from runtime.routers import hwm_alias
from runtime.trace import trace_head_forget, trace_head_hint, trace_head_remember, trace_rows_build

AFTER_LEDGER_ROWS = register(
    "checkpoint.after_ledger_rows",
    "the ledger entries of g+1 are inserted, its checkpoint row is not: one database, nothing "
    "committed; split HWM database, the transaction holding both is still open",
)
AFTER_APPEND = register(
    "checkpoint.after_append",
    "checkpoint g+1 and its ledger entries are inserted (committed only with a split HWM "
    "database); the HWM still says g",
)
BEFORE_HWM_CAS = register(
    "checkpoint.before_hwm_cas",
    "the run row is fenced and locked in an open transaction; the HWM still says g",
)
AFTER_COMMIT = register(
    "checkpoint.after_commit",
    "generation g+1 is committed (checkpoint, ledger entries, HWM, trace); the caller has not "
    "seen the result yet",
)
AFTER_HWM_CAS = register(
    "checkpoint.after_hwm_cas",
    "the HWM CAS g -> g+1 ran: committed if the HWM has its own database, else still uncommitted",
)



def _explain_fence(lease: Lease) -> LeaseLostError:
    row = (
        Run.objects.filter(run_id=lease.run_id)
        .values("owner_worker", "lease_version", "state_version")
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
    return LeaseLostError("cannot commit: the lease expired by the database clock", **context)


# --- services -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommitPlan:
    """Everything one commit writes, prepared (sealed, hashed) before its transaction opens.

    Attributes: the caller's ``lease``; the sealed ``envelope`` and its unsaved checkpoint
    ``row``; the ledger ``entries`` to insert and the head they extend (``ledger_before``); the
    trace ``events`` and ``env_version``; the HWM's ``expected_generation``; ``renew_seconds``
    to extend the lease by (or None); ``within``: callables run inside the transaction.
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
                   generation: int) -> dict[str, Any]:
    """The SET clause of the fence UPDATE besides the trace head."""
    changes: dict[str, Any] = {
        "state_version": F("state_version") + 1, "phase": phase, "stop_reason": stop_reason,
        "generation": generation, "updated_at": Now()}
    if renew_seconds is not None:
        changes["lease_expires_at"] = ExpressionWrapper(
            Now() + timedelta(seconds=renew_seconds), output_field=DateTimeField())
    return changes


def _fence_update(lease: Lease, renew_seconds: float | None) -> UpdateBuilder:
    """The hot-path fence UPDATE written with the query API, from its varying values (compiled
    once per shape by ``runtime.compiled_updates``)."""
    def build(s: Mapping[str, Any]) -> tuple[QuerySet[Any], dict[str, Any]]:
        held = held_by(replace(lease, run_id=s["run_id"], worker=s["worker"],
                               lease_version=s["lease_version"]))
        queryset = Run.objects.filter(
            held, state_version=s["state_version"], trace_seq=s["seq"], trace_head=s["head"],
            **{k: s[k] for k in _IDENTITY_COLUMNS})
        return queryset, {"trace_seq": s["new_seq"], "trace_head": s["new_head"],
                          **_fence_changes(renew_seconds, phase=s["phase"],
                                           stop_reason=s["stop_reason"],
                                           generation=s["generation"])}
    return build


def _fence(plan: CommitPlan) -> list[TraceEvent]:
    """The one run-row UPDATE of a commit: lease fence, identity, state-version CAS, phase and
    generation mirrors, and the trace head moved over this commit's events (compare-and-set on
    the head this process last saw). Returns the trace rows to insert.

    Hot path: one statement. When the remembered trace head is stale (another service appended
    an event) or the fence fails, the slow path reads the row once under a lock and either
    rebuilds the events on the real head or explains the failure.
    """
    lease, envelope, events, env_version = plan.lease, plan.envelope, plan.events, plan.env_version
    run_id = lease.run_id
    seq, head = trace_head_hint(run_id) or (None, "")
    payload = envelope.payload
    if plan.renew_seconds is not None and not plan.renew_seconds > 0:
        raise ValueError("renew_seconds must be > 0")
    if seq is not None:
        rows, new_seq, new_head = trace_rows_build(run_id=run_id, seq=seq, head=head, events=events,
                                                   environment_version=env_version)
        slots = {"run_id": run_id, "worker": lease.worker, "lease_version": lease.lease_version,
                 "state_version": lease.state_version, **_identity_filter(envelope),
                 "seq": seq, "head": head, "new_seq": new_seq, "new_head": new_head,
                 "phase": payload.phase.value,
                 "stop_reason": payload.stop_reason.value if payload.stop_reason else "",
                 "generation": envelope.generation}
        if compiled_update(alias=router.db_for_write(Run), shape=("fence", plan.renew_seconds),
                           build=_fence_update(lease, plan.renew_seconds), slots=slots) == 1:
            trace_head_remember(run_id, new_seq, new_head)
            return rows
    changes = _fence_changes(plan.renew_seconds, phase=payload.phase.value,
                             stop_reason=payload.stop_reason.value if payload.stop_reason else "",
                             generation=envelope.generation)
    fence = Run.objects.filter(held_by(lease), state_version=lease.state_version,
                               **_identity_filter(envelope))
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
        raise _explain_fence(lease)
    trace_head_remember(run_id, new_seq, new_head)
    return rows


def _commit_one_transaction(plan: CommitPlan) -> None:
    """Default: the HWM on the default database, so the whole advance is one transaction
    (DESIGN.md section 4.3): fence UPDATE, ledger rows, checkpoint row, HWM CAS, trace rows."""
    lease, envelope, row, entries = plan.lease, plan.envelope, plan.row, plan.entries
    expected_generation, ledger_before = plan.expected_generation, plan.ledger_before
    try:
        with transaction.atomic():
            trace_rows = _fence(plan)
            for write in plan.within:
                write()
            ledger_rows_add(run_id=lease.run_id, entries=entries, generation=envelope.generation)
            crash_point(AFTER_LEDGER_ROWS)
            # ignore_conflicts: a retried commit of the very same bytes reuses its row (the row is
            # content-addressed by (run, digest)); one INSERT, no SELECT first.
            compiled_insert(alias=router.db_for_write(Checkpoint), objs=[row], ignore_conflicts=True)
            crash_point(AFTER_APPEND)
            crash_point(BEFORE_HWM_CAS)
            hwm_advance(run=_hwm_run(envelope), expected=expected_generation,
                        generation=envelope.generation, digest=row.digest)
            crash_point(AFTER_HWM_CAS)
            compiled_insert(alias=router.db_for_write(TraceEvent), objs=trace_rows)
    except IntegrityError:
        trace_head_forget(lease.run_id)
        raise _ledger_conflict(lease, ledger_before) from None
    except BaseException:
        trace_head_forget(lease.run_id)  # the UPDATE that moved it rolled back
        raise


def _commit_split_hwm(plan: CommitPlan) -> None:
    """The HWM in its own database (``RATCHET_HWM_DATABASE_URL``): three transactions, in the
    order and with the crash windows DESIGN.md section 4.3 gives."""
    lease, envelope, row, entries = plan.lease, plan.envelope, plan.row, plan.entries
    expected_generation, ledger_before = plan.expected_generation, plan.ledger_before
    try:
        with transaction.atomic():
            # Under the fenced row lock nobody else can commit, so entries beyond the head this
            # state extends are orphans of a crashed commit (runtime.ledger.ledger_orphans_drop).
            if not _fenced_lock(lease, plan.envelope):
                run_identity_check(run=run_load(run_id=lease.run_id), envelope=plan.envelope)
                raise _explain_fence(lease)
            ledger_orphans_drop(run_id=lease.run_id, committed_length=ledger_before.length)
            ledger_rows_add(run_id=lease.run_id, entries=entries, generation=envelope.generation)
            crash_point(AFTER_LEDGER_ROWS)
            compiled_insert(alias=router.db_for_write(Checkpoint), objs=[row], ignore_conflicts=True)
    except IntegrityError:
        raise _ledger_conflict(lease, ledger_before) from None
    crash_point(AFTER_APPEND)
    try:
        with transaction.atomic():
            trace_rows = _fence(plan)
            for write in plan.within:
                write()
            crash_point(BEFORE_HWM_CAS)
            hwm_advance(run=_hwm_run(envelope), expected=expected_generation,
                        generation=envelope.generation, digest=row.digest)
            crash_point(AFTER_HWM_CAS)
            compiled_insert(alias=router.db_for_write(TraceEvent), objs=trace_rows)
    except BaseException:
        trace_head_forget(lease.run_id)
        raise


def _fenced_lock(lease: Lease, envelope: CheckpointEnvelope) -> bool:
    """Lock the run row if ``lease`` still fences it and ``envelope`` is this run's (``SELECT ...
    FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the write lock), so a foreign
    state is refused before any of its rows is written. Compiled once per process."""
    def build(s: Mapping[str, Any]) -> QuerySet[Any]:
        held = held_by(replace(lease, run_id=s["run_id"], worker=s["worker"],
                               lease_version=s["lease_version"]))
        return (Run.objects.select_for_update()
                .filter(held, state_version=s["state_version"],
                        **{k: s[k] for k in _IDENTITY_COLUMNS})
                .values_list("pk")[:1])
    return bool(compiled_rows(alias=router.db_for_write(Run), shape=("fenced_lock",), build=build,
                              slots={"run_id": lease.run_id, "worker": lease.worker,
                                     "lease_version": lease.lease_version,
                                     "state_version": lease.state_version,
                                     **_identity_filter(envelope)}))


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
    """Write ``plan``: one transaction on one database, three with a separate HWM database.

    Raises:
        LeaseLostError: the fence failed (taken over, expired, state version moved on).
        IdentityMismatchError / ScenarioMismatchError: the envelope is not this run's.
        StaleGenerationError / HighWaterMarkMissingError: the HWM CAS failed.
        CheckpointInvariantError: a ledger entry's ``seq`` or ``(kind, key)`` is already stored.
        RunNotFoundError: no such run.
    """
    if hwm_alias() == DEFAULT_DB_ALIAS:
        _commit_one_transaction(plan)
    else:
        _commit_split_hwm(plan)
