"""The checkpoint commit protocol and restore (DESIGN.md sections 3.1, 4.3 and 4.4).

Commit (:func:`checkpoint_commit`): prepare everything outside the transaction (hash the staged
receipts-ledger entries onto the committed head, validate, encode the state once, seal, build
the trace rows), then, with the HWM on the default database, ONE transaction:

1. one ``UPDATE`` of the ``Run`` row: the lease fence, identity and the generation extended as
   its WHERE clause, the state version CAS, phase/generation/digest mirrors, the lease extension
   (or its release, for a run's last commit) and the trace head (a CAS on the head this process
   last wrote, so trace appends need no read-modify-write per event);
2. rows the caller must commit with the checkpoint (``within``: receipt cache, attachments);
3. ledger rows no committed checkpoint covers dropped, the new ledger rows (one multi-row
   INSERT), crash point ``checkpoint.after_ledger_rows``;
4. the checkpoint row, ``checkpoint.after_append``;
5. the HWM compare-and-set ``g -> g+1`` (``checkpoint.before_hwm_cas`` / ``after_hwm_cas``);
6. the trace rows (one multi-row INSERT); COMMIT is the commit point (``checkpoint.after_commit``).

A crash anywhere before COMMIT leaves nothing of ``g+1``. The statements are Django query-API
calls, each already one SQL statement; on PostgreSQL they travel as one batch, between a
``BEGIN`` and a ``COMMIT`` said in SQL (two round trips, DESIGN.md section 4.13). The
statements of a commit and of a restore (all but the HWM read) are compiled by the ORM once per
process and then only refilled (``runtime.database.statements``): the same SQL, without rebuilding
it every time.

**The mark in its own database** (the default, DESIGN.md section 4.2): two transactions -- the
steps above without the mark (the run row also names g+1's digest, and ledger rows no committed
checkpoint covers are dropped first) commit on the main database, the commit point; then the
mark's compare-and-set commits in its own. A crash in between leaves the mark one behind the
run row; ``runtime.checkpoints.mark_completion`` moves it before anything reads it as committed. DESIGN.md
section 4.3 gives the crash windows and why this order is safe.

Restore (:func:`checkpoint_restore`) completes such a mark, then loads only the checkpoint the
HWM names, checks it as
``runtime.checkpoints.checks`` describes, verifies the receipts ledger against the head it signs
(incrementally per process; in full for :func:`checkpoint_verify`) and attaches it; a ledger
that does not verify freezes the run with a review case. Sealing is ``runtime.core.envelope``;
the HWM store is ``runtime.checkpoints.high_water_marks``; the ledger rows are ``runtime.checkpoints.ledger``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from runtime.checkpoints.checks import (
    Restored,
    committed_bytes_read,
    restored_verify,
    run_load,
    run_row_read,
    stored_envelope_open,
)
from runtime.checkpoints.high_water_marks import HighWaterMarkInfo, hwm_create
from runtime.checkpoints.ledger import LedgerRows, ledger_committed, ledger_failure_freeze, ledger_verify
from runtime.checkpoints.mark_completion import hwm_committed
from runtime.checkpoints.scenario import stored_scenario
from runtime.checkpoints.transaction import AFTER_COMMIT, CommitPlan, commit_plan_apply
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import LedgerHead, RunState, VersionSet
from runtime.core.crashpoints import crash_point
from runtime.core.envelope import CheckpointEnvelope, envelope_digest, seal
from runtime.core.ledger import LedgerView, ledger_pending_check, state_ledger
from runtime.core.signing import TrustRoot
from runtime.errors import (
    CheckpointNotFoundError,
    IdentityMismatchError,
    LedgerChainError,
    MarkPendingError,
    RatchetError,
    RunExistsError,
    ScenarioMismatchError,
)
from runtime.evidence.trace import trace_events_check
from runtime.keys import keyring_for
from runtime.models import Checkpoint, Run
from runtime.ownership.leases import Lease, lease_acquire

logger = logging.getLogger("runtime.checkpoints.protocol")


@dataclass(frozen=True)
class CommitResult:
    """A committed checkpoint.

    Attributes:
        lease: the caller's lease with the advanced ``state_version``; use it for the next commit.
        generation: the committed generation (the HWM's new value).
        digest: ``sha256:<hex>`` of the stored envelope bytes, as recorded in the HWM.
    """

    lease: Lease
    generation: int
    digest: str


def checkpoint_commit(
    *,
    lease: Lease,
    state: RunState,
    expected_generation: int,
    events: Sequence[tuple[str, dict[str, Any]]] = (),
    environment_version: str = "",
    renew_seconds: float | None = None,
    within: Sequence[Callable[[], None]] = (),
    release: bool = False,
) -> CommitResult:
    """Commit ``state`` as generation ``expected_generation + 1`` (DESIGN.md section 4).

    See the module docstring for the protocol and why it is crash-safe. The ledger entries the
    state staged (``runtime.core.ledger``) are written in the same transaction and the sealed
    state commits to the head they lead to.

    Args:
        lease: the caller's current lease (its ``state_version`` must match the run row).
        state: the run state to checkpoint; its identity must match the run.
        expected_generation: the generation the caller restored or last committed (>= 0).
        events: trace events ``(event_type, payload)`` to append in the commit transaction.
        environment_version: environment version recorded on those events; defaults to
            ``state.environment.version``.
        renew_seconds: if given, the same fenced UPDATE extends the lease to this many seconds
            from now by the database clock (so a step needs no separate renewal transaction);
            the returned lease's ``expires_at`` is then this process's estimate.
        within: callables run inside the commit transaction after the fence (the engine's
            receipt-cache row), so they commit or roll back with the checkpoint.
        release: give the lease up in the same fenced UPDATE and trace ``lease.released`` after
            ``checkpoint.committed`` (a run's last commit: no transaction of its own for the
            release); ``renew_seconds`` is then ignored and the returned lease is no longer held.

    Returns:
        :class:`CommitResult` with the lease's advanced ``state_version``.

    Raises:
        CanonicalizationError / CheckpointSchemaError / CheckpointInvariantError: invalid state or
            event payload, or the pending write's key is already executed or quarantined;
            nothing written.
        IdentityMismatchError / ScenarioMismatchError: the state belongs to another run.
        RunNotFoundError: no such run.
        LeaseLostError: the lease was taken over, expired or ``state_version`` moved on.
        StaleGenerationError: the HWM is not at ``expected_generation``.
        HighWaterMarkMissingError: the HWM row or store is missing.
        MarkPendingError: committed (its ``committed`` attribute is the :class:`CommitResult`),
            but the mark in its own database could not be moved; the next restore moves it.
        KeyringError: no checkpoint key is configured.
    """
    if expected_generation < 0:
        raise ValueError("expected_generation must be >= 0")
    if state.identity.run_id != lease.run_id:
        raise IdentityMismatchError(
            "the state belongs to another run than the lease", run_id=lease.run_id
        )
    generation = expected_generation + 1
    keyring = keyring_for(TrustRoot.CHECKPOINT)
    view = state_ledger(state)
    ledger_pending_check(state)
    entries, ledger_head = view.chain_staged()
    before = state.ledger
    state.ledger = ledger_head
    try:
        raw, envelope = seal(state, generation=generation, keyring=keyring)
    except BaseException:
        state.ledger = before
        raise
    checked_events = trace_events_check(events=events)
    digest = envelope_digest(raw)
    env_version = environment_version or envelope.payload.environment.version
    checked_events.append(("checkpoint.committed", {
        "generation": generation,
        "digest": digest,
        "key_id": envelope.key_id,
        "lease_version": lease.lease_version,
        "state_version": lease.state_version + 1,
        "phase": envelope.payload.phase.value,
        "ledger_length": ledger_head.length,
    }))
    if release:
        # The payload runtime.ownership.leases.lease_release writes.
        checked_events.append(("lease.released", {"worker": lease.worker,
                                                  "lease_version": lease.lease_version}))
    row = Checkpoint(run_id=lease.run_id, generation=generation, envelope=raw, digest=digest,
                     key_id=envelope.key_id, schema_version=envelope.schema_version,
                     lease_version=lease.lease_version)
    plan = CommitPlan(lease=lease, envelope=envelope, row=row, entries=entries,
                       events=checked_events, env_version=env_version,
                       expected_generation=expected_generation, ledger_before=before,
                       renew_seconds=None if release else renew_seconds, within=tuple(within),
                       release=release)
    try:
        commit_plan_apply(plan)
    except MarkPendingError as exc:
        # Committed at its commit point: the caller's state and lease are the committed ones.
        exc.committed = _committed(lease=lease, view=view, head=ledger_head, envelope=envelope,
                                   digest=digest, renew_seconds=renew_seconds)
        raise
    except BaseException:
        state.ledger = before
        raise
    crash_point(AFTER_COMMIT)
    return _committed(lease=lease, view=view, head=ledger_head, envelope=envelope, digest=digest,
                      renew_seconds=renew_seconds)


def _committed(*, lease: Lease, view: LedgerView, head: LedgerHead, envelope: CheckpointEnvelope,
               digest: str, renew_seconds: float | None) -> CommitResult:
    """After the commit point: the ledger view and the per-process verification cache move to
    the committed head, and the caller gets its lease with the advanced state version."""
    view.committed(head)
    if view.reader is None:  # a state built in this process: its entries are rows from now on
        view.reader = LedgerRows(lease.run_id)
    ledger_committed(run_id=lease.run_id, head=head)
    logger.debug(
        "run %s: committed generation %d (digest %s, key id %s, lease version %d, ledger %d)",
        lease.run_id, envelope.generation, digest, envelope.key_id, lease.lease_version,
        head.length,
    )
    expires_at = lease.expires_at if renew_seconds is None else (
        datetime.now(UTC) + timedelta(seconds=renew_seconds))
    return CommitResult(
        lease=replace(lease, state_version=lease.state_version + 1, expires_at=expires_at),
        generation=envelope.generation,
        digest=digest,
    )


def run_create(
    *,
    state: RunState,
    worker: str,
    ttl_seconds: float,
    spec: dict[str, Any] | None = None,
    events: Sequence[tuple[str, dict[str, Any]]] = (),
) -> CommitResult:
    """Create a run from its first state and commit it as generation 1.

    Inserts the ``Run`` row (identity columns from ``state``) with ``worker`` holding the lease
    for ``ttl_seconds`` seconds, the HWM row at generation 0, then commits generation 1 through
    :func:`checkpoint_commit`. The state is validated before anything is written.

    Args:
        state: the initial run state (valid under the schema and invariants).
        worker: the worker id that will hold the lease.
        ttl_seconds: lease duration in seconds (> 0).
        spec: the JSON task spec the run was started with (kept on the run row).
        events: trace events to append with the first commit.

    Raises:
        RunExistsError: a run (or HWM row) with this id already exists.
        everything :func:`checkpoint_commit` raises.
    """
    keyring = keyring_for(TrustRoot.CHECKPOINT)
    seal(state, generation=1, keyring=keyring)  # validate before any row exists
    trace_events_check(events=events)
    spec = dict(spec or {})
    canonical_json(spec)
    ident = state.identity
    run_id = ident.run_id
    try:
        with transaction.atomic():
            Run(
                run_id=run_id,
                tenant_id=ident.tenant_id,
                task_id=ident.task_id,
                task_version=ident.task_version,
                policy_id=ident.policy_id,
                policy_version=ident.policy_version,
                environment_instance_id=state.environment.instance_id,
                scenario_fingerprint=ident.scenario_fingerprint,
                phase=state.phase.value,
                stop_reason=state.stop_reason.value if state.stop_reason else "",
                spec=spec,
            ).save(force_insert=True)
            lease = lease_acquire(run_id=run_id, worker=worker, ttl_seconds=ttl_seconds)
    except IntegrityError:
        raise RunExistsError(run_id=run_id) from None
    hwm_create(
        run_id=run_id, task_id=ident.task_id, environment_instance_id=state.environment.instance_id
    )
    return checkpoint_commit(lease=lease, state=state, expected_generation=0, events=events)


def checkpoint_hwm(*, run_id: str) -> HighWaterMarkInfo:
    """The run's high-water mark, after completing a commit it lags behind
    (``runtime.checkpoints.mark_completion``).

    Raises:
        RunNotFoundError: no such run.
        HighWaterMarkMissingError: the HWM row, table or database is missing.
        HighWaterMarkBehindError and the other errors of ``hwm_committed``.
    """
    return hwm_committed(run=run_load(run_id=run_id))


def checkpoint_restore(
    *,
    run_id: str,
    scenario_fingerprint: str,
    task_version: str | None = None,
    policy_version: str | None = None,
    versions: VersionSet | None = None,
    full_ledger: bool = False,
) -> Restored:
    """Load and verify the run's committed checkpoint and its ledger (DESIGN.md sections 3.1, 4).

    Args:
        run_id: the run.
        scenario_fingerprint: the externally fixed scenario fingerprint the caller expects.
        task_version, policy_version: if given, must equal the checkpoint's.
        versions: if given, the version combination must equal the checkpoint's.
        full_ledger: verify every ledger entry, not only those this process has not verified.

    Raises:
        LedgerChainError: the ledger does not chain to the checkpoint's head; the run is frozen
            with a review case.
        RunNotFoundError: no such run.
        HighWaterMarkMissingError: HWM row, table or database missing (fail closed).
        HighWaterMarkBehindError: the run row is ahead of the mark by more than the one commit
            ``runtime.checkpoints.mark_completion`` completes.
        CheckpointNotFoundError: nothing committed yet, or the committed row is gone.
        CheckpointCorruptError / UnknownKeyError / BadSignatureError: the stored bytes are not the
            authentic committed envelope.
        CheckpointSchemaError / CheckpointInvariantError / CheckpointMigrationError: from
            ``open_envelope``.
        RollbackError: a validly signed but non-committed envelope stands in for the committed one.
        IdentityMismatchError: envelope identity differs from the run row / HWM scope.
        ScenarioMismatchError: fingerprint differs from the caller's or the run's.
        VersionMismatchError: task/policy version or version set differ.
    """
    run = run_row_read(run_id=run_id)
    hwm = hwm_committed(run=run)
    if hwm.generation == 0:
        raise CheckpointNotFoundError("the run has no committed checkpoint yet", run_id=run_id)
    raw = committed_bytes_read(run=run, hwm=hwm)
    envelope = stored_envelope_open(raw=raw, run_id=run_id, generation=hwm.generation)
    restored = restored_verify(
        run=run,
        hwm=hwm,
        envelope=envelope,
        raw=raw,
        scenario_fingerprint=scenario_fingerprint,
        task_version=task_version,
        policy_version=policy_version,
        versions=versions,
    )
    _ledger_attach(restored, full=full_ledger)
    return restored


def _ledger_attach(restored: Restored, *, full: bool) -> None:
    """Verify the ledger the checkpoint commits to and attach the view lookups go through.

    Raises:
        LedgerChainError: the ledger does not verify; the run is frozen with a review case.
    """
    state = restored.state
    run_id = state.identity.run_id
    try:
        ledger_verify(run_id=run_id, head=state.ledger, full=full)
    except LedgerChainError as exc:
        ledger_failure_freeze(run_id=run_id, error=exc, generation=restored.generation)
        raise
    state.attach_ledger(LedgerView(run_id=run_id, head=state.ledger, reader=LedgerRows(run_id),
                                   staged=restored.envelope.carried_ledger))


def checkpoint_verify(*, run_id: str) -> Restored:
    """Verify the committed checkpoint without knowing the caller's scenario (for the CLI).

    Checks the MAC, schema, invariants, HWM generation and digest, identity, the whole receipts
    ledger, and that the scenario fingerprint recomputed from the spec stored with the run is
    the one the checkpoint and the run row record (a stored spec edited afterwards fails).

    Raises:
        as :func:`checkpoint_restore`; ScenarioMismatchError also when the stored spec no longer
        gives the run row's fingerprint, or cannot be read at all.
    """
    run = run_load(run_id=run_id)
    if not (run.spec and "task" in run.spec and "initial" in run.spec):
        # A row without a stored spec (written by hand or by another tool): there is nothing to
        # recompute from, nothing can resume it, and what opens its adapter says which part is
        # missing (RunSpecMissingError); the checkpoint is checked against the row's fingerprint.
        return checkpoint_restore(run_id=run_id, scenario_fingerprint=run.scenario_fingerprint,
                                  full_ledger=True)
    try:
        _spec, scenario = stored_scenario(stored=run.spec)
    except (KeyError, TypeError, ValueError, RatchetError) as exc:
        raise ScenarioMismatchError(f"the spec stored with the run cannot be read ({type(exc).__name__}): "
                                    "its scenario cannot be checked", run_id=run_id) from None
    if scenario != run.scenario_fingerprint:
        raise ScenarioMismatchError("the spec stored with the run no longer gives the scenario the run "
                                    "was created for (the stored spec was edited)", run_id=run_id)
    return checkpoint_restore(run_id=run_id, scenario_fingerprint=scenario, full_ledger=True)
