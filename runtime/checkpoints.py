"""The checkpoint commit protocol and restore (DESIGN.md section 4, Freshness and Ownership).

Commit (:func:`checkpoint_commit`), in this order:

1. **Validate** schema, cross-object invariants and serialisability (``seal`` does all three)
   and the trace events' payloads. On failure nothing is written: an invalid state never
   advances the HWM, so the last good checkpoint stays the restorable one.
2. **Append** checkpoint ``g+1`` in its own committed transaction. Checkpoints are append-only
   and several rows may share a generation (orphans of crashed or fenced commits); an orphan is
   harmless because restore goes by the HWM's generation *and* digest.
3. In one transaction on the default database: **fence** the ``Run`` row with a compare-and-set
   on ``(owner_worker, lease_version, state_version, lease_expires_at > Now())`` that also locks
   it; **compare-and-set the HWM** ``g -> g+1`` with the envelope digest; append the trace
   events; **commit**. The HWM CAS is the commit point.

Crash anywhere before the HWM CAS commits: the HWM still says ``g`` and restore loads ``g``;
``g+1`` is an ignored orphan. The named crash points (``checkpoint.after_append``,
``checkpoint.before_hwm_cas``, ``checkpoint.after_hwm_cas``) let tests SIGKILL a child there.

**HWM in its own database** (``RATCHET_HWM_DATABASE_URL``): the HWM CAS then runs and commits in
its own transaction on that alias *while* the default-database transaction, which holds the
locked and fenced ``Run`` row, is still open; the default transaction commits afterwards. Why
this order is crash-safe:

* The HWM commit is the single commit point. Before it, nothing a restore reads has changed (the
  row ``g+1`` exists but the HWM names ``g``). After it, restore loads ``g+1``, whose bytes were
  committed in step 2, and checks them against the digest the HWM recorded.
* A crash between the HWM commit and the default commit rolls back the ``Run`` row update and the
  trace events of this commit: ``state_version`` and the ``generation`` mirror stay behind and the
  commit's trace events are lost. That is safe. ``state_version`` is only a compare-and-set token,
  and the next holder re-reads it when it takes the lease; a surviving worker that retries with
  ``expected_generation=g`` passes the fence but fails the HWM CAS (:class:`StaleGenerationError`).
  Restore logs a warning when the mirror lags the HWM, so the lost events are visible.
* The ``Run`` row lock is held across the HWM CAS, so no other worker can pass the fence and
  reach the HWM between our fence check and our HWM commit.
* Committing the default transaction first instead would let a crash leave a trace that claims a
  commit the HWM never recorded.

Restore (:func:`checkpoint_restore`) loads only the checkpoint whose generation equals the HWM and
whose bytes hash to the HWM's digest, verifies the MAC (``open_envelope``), schema and invariants,
then identity, scenario fingerprint and versions, raising a typed error for each failure. A
missing HWM row, table or database fails closed (:class:`HighWaterMarkMissingError`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    OperationalError,
    ProgrammingError,
    transaction,
)
from django.db.models import F
from django.db.models.functions import Now

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import (
    CheckpointEnvelope,
    RunState,
    VersionSet,
    envelope_digest,
    open_envelope,
    seal,
)
from runtime.core.crashpoints import crash_point, register
from runtime.core.signing import Keyring, TrustRoot
from runtime.errors import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    HighWaterMarkMissingError,
    IdentityMismatchError,
    LeaseLostError,
    RatchetError,
    RollbackError,
    RunExistsError,
    RunNotFoundError,
    ScenarioMismatchError,
    SigningError,
    StaleGenerationError,
    VersionMismatchError,
)
from runtime.keys import keyring_for
from runtime.leases import Lease, held_by, lease_acquire
from runtime.models import Checkpoint, HighWaterMark, Run
from runtime.routers import hwm_alias
from runtime.trace import trace_append_txn

logger = logging.getLogger("runtime.checkpoints")

AFTER_APPEND = register(
    "checkpoint.after_append",
    "checkpoint g+1 is stored and committed; the run row and the HWM are untouched (HWM = g)",
)
BEFORE_HWM_CAS = register(
    "checkpoint.before_hwm_cas",
    "the run row is fenced and locked in an open transaction; the HWM still says g",
)
AFTER_HWM_CAS = register(
    "checkpoint.after_hwm_cas",
    "the HWM CAS g -> g+1 ran: committed if the HWM has its own database, else still uncommitted",
)

_HWM_DB_ERRORS = (OperationalError, ProgrammingError)
"""A missing table (ProgrammingError on PostgreSQL, OperationalError on SQLite) or an unreachable
database (OperationalError): the HWM store is missing, so fail closed."""


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


@dataclass(frozen=True)
class Restored:
    """A verified, committed checkpoint.

    Attributes:
        state: the run state to resume from.
        generation: the HWM generation it was committed at.
        digest: digest of its envelope bytes.
        envelope: the verified envelope (key id, created_at, ...).
        state_version: the run row's ``state_version`` when read; the lease the caller holds
            carries the value its next commit must match.
    """

    state: RunState
    generation: int
    digest: str
    envelope: CheckpointEnvelope
    state_version: int


@dataclass(frozen=True)
class HighWaterMarkInfo:
    """A run's HWM: committed ``generation`` (0 before the first commit) and its ``digest``."""

    generation: int
    digest: str


@dataclass(frozen=True)
class CheckpointReport:
    """One stored checkpoint row as the ``checkpoint`` management command shows it.

    Attributes:
        generation, digest, key_id, schema_version, lease_version: the row's columns.
        created_at: when the row was written (database clock).
        committed: the HWM names this row (same generation and the bytes hash to its digest).
        status: ``"valid"`` or the text of the error that verification raised.
        envelope: the stored JSON (for display), or ``None`` when the bytes are not JSON.
    """

    generation: int
    digest: str
    key_id: str
    schema_version: int
    lease_version: int
    created_at: datetime
    committed: bool
    status: str
    envelope: dict[str, Any] | None


# --- helpers --------------------------------------------------------------------------------


def _load_run(run_id: str) -> Run:
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    return run


def _hwm_scope(run: Run) -> dict[str, str]:
    return {
        "task_id": run.task_id,
        "run_id": run.run_id,
        "environment_instance_id": run.environment_instance_id,
    }


def _read_hwm(run: Run) -> HighWaterMarkInfo:
    alias = hwm_alias()
    query = (
        HighWaterMark.objects.using(alias)
        .filter(**_hwm_scope(run))
        .values("generation", "checkpoint_digest")
    )
    try:
        if transaction.get_connection(alias).in_atomic_block:
            # A savepoint, so a missing table does not poison the caller's PostgreSQL transaction.
            with transaction.atomic(using=alias):
                row = query.first()
        else:
            row = query.first()
    except _HWM_DB_ERRORS as exc:
        raise HighWaterMarkMissingError(
            f"the high-water mark store is unavailable ({type(exc).__name__}): failing closed",
            run_id=run.run_id,
            alias=alias,
        ) from None
    if row is None:
        raise HighWaterMarkMissingError(
            run_id=run.run_id,
            task_id=run.task_id,
            environment_instance_id=run.environment_instance_id,
        )
    return HighWaterMarkInfo(generation=row["generation"], digest=row["checkpoint_digest"])


def _open(
    raw: bytes, *, run_id: str, generation: int | None, keyring: Keyring | None = None
) -> CheckpointEnvelope:
    """``open_envelope`` whose errors always name the run and generation the bytes were stored
    under: the core knows only the key id, an operator needs to know which row to look at."""
    try:
        return open_envelope(raw, keyring=keyring or keyring_for(TrustRoot.CHECKPOINT))
    except RatchetError as exc:
        context = dict(exc.context)
        context.setdefault("run_id", run_id)
        if generation is not None:
            context.setdefault("generation", generation)
        if context == exc.context:
            raise
        raise type(exc)(exc.message, **context) from None


def _check_events(events: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    checked = []
    for event_type, payload in events:
        if not isinstance(event_type, str) or not 1 <= len(event_type) <= 64:
            raise ValueError("trace event types are strings of 1-64 characters")
        body = dict(payload)
        canonical_json(body)  # raises CanonicalizationError before anything is written
        checked.append((event_type, body))
    return checked


def _check_identity(run: Run, envelope: CheckpointEnvelope) -> None:
    """The envelope must belong to exactly this run row (and so to its HWM scope)."""
    ident = envelope.payload.identity
    pairs = (
        ("run_id", run.run_id, envelope.run_id),
        ("tenant_id", run.tenant_id, envelope.tenant_id),
        ("task_id", run.task_id, envelope.task_id),
        ("environment_instance_id", run.environment_instance_id, envelope.environment_instance_id),
        ("task_version", run.task_version, ident.task_version),
        ("policy_id", run.policy_id, ident.policy_id),
        ("policy_version", run.policy_version, ident.policy_version),
    )
    for name, expected, found in pairs:
        if expected != found:
            raise IdentityMismatchError(
                f"checkpoint {name} {found!r:.80} differs from the run's {expected!r:.80}",
                run_id=run.run_id,
                generation=envelope.generation,
            )
    if ident.scenario_fingerprint != run.scenario_fingerprint:
        raise ScenarioMismatchError(
            "checkpoint scenario fingerprint differs from the one recorded when the run started",
            run_id=run.run_id,
            generation=envelope.generation,
        )


def _verify_restored(
    *,
    run: Run,
    hwm: HighWaterMarkInfo,
    envelope: CheckpointEnvelope,
    raw: bytes,
    scenario_fingerprint: str,
    task_version: str | None,
    policy_version: str | None,
    versions: VersionSet | None,
) -> Restored:
    _check_identity(run, envelope)
    digest = digest_bytes(raw)
    if envelope.generation != hwm.generation or digest != hwm.digest:
        # A valid MAC does not mean latest (DESIGN.md section 7: "valid HMAC taken as latest").
        raise RollbackError(
            run_id=run.run_id, generation=envelope.generation, hwm_generation=hwm.generation
        )
    ident = envelope.payload.identity
    if ident.scenario_fingerprint != scenario_fingerprint:
        raise ScenarioMismatchError(run_id=run.run_id, generation=envelope.generation)
    if task_version is not None and ident.task_version != task_version:
        raise VersionMismatchError(
            f"task version changed: checkpoint has {ident.task_version!r:.80}, "
            f"resume asks for {task_version!r:.80}",
            run_id=run.run_id,
            generation=envelope.generation,
        )
    if policy_version is not None and ident.policy_version != policy_version:
        raise VersionMismatchError(
            f"policy version changed: checkpoint has {ident.policy_version!r:.80}, "
            f"resume asks for {policy_version!r:.80}",
            run_id=run.run_id,
            generation=envelope.generation,
        )
    if versions is not None and envelope.payload.versions != versions:
        changed = sorted(
            name
            for name in VersionSet.model_fields
            if getattr(envelope.payload.versions, name) != getattr(versions, name)
        )
        raise VersionMismatchError(
            f"version combination changed: {', '.join(changed)}",
            run_id=run.run_id,
            generation=envelope.generation,
        )
    if run.generation != hwm.generation:
        logger.warning(
            "run %s: the run row says generation %d but the HWM says %d; the commit of generation "
            "%d crashed after its commit point and its trace events were lost",
            run.run_id,
            run.generation,
            hwm.generation,
            hwm.generation,
        )
    return Restored(
        state=envelope.payload,
        generation=envelope.generation,
        digest=digest,
        envelope=envelope,
        state_version=run.state_version,
    )


def _committed_bytes(run: Run, hwm: HighWaterMarkInfo) -> bytes:
    """The stored bytes the HWM committed; fail closed, as precisely as possible, otherwise."""
    rows = [
        (bytes(envelope), digest)
        for envelope, digest in Checkpoint.objects.filter(
            run_id=run.run_id, generation=hwm.generation
        )
        .order_by("id")
        .values_list("envelope", "digest")
    ]
    if not rows:
        raise CheckpointNotFoundError(
            "the committed checkpoint is missing from the store",
            run_id=run.run_id,
            generation=hwm.generation,
        )
    for raw, _ in rows:
        if digest_bytes(raw) == hwm.digest:
            return raw
    # The committed bytes were altered or replaced. Work out how, so the operator gets the
    # specific reason (forged MAC first), then refuse.
    suspects = [raw for raw, digest in rows if digest == hwm.digest] or [raw for raw, _ in rows]
    keyring = keyring_for(TrustRoot.CHECKPOINT)
    first_error: RatchetError | None = None
    some_valid = False
    for raw in suspects:
        try:
            _open(raw, run_id=run.run_id, generation=hwm.generation, keyring=keyring)
        except SigningError:
            raise
        except RatchetError as exc:
            first_error = first_error or exc
        else:
            some_valid = True
    if some_valid:
        raise RollbackError(
            "a validly signed checkpoint is stored where the committed one should be",
            run_id=run.run_id,
            generation=hwm.generation,
        )
    if first_error is not None:
        raise first_error
    raise CheckpointCorruptError(run_id=run.run_id, generation=hwm.generation)


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


def _hwm_cas(run: Run, *, expected: int, generation: int, digest: str) -> None:
    alias = hwm_alias()
    scope = HighWaterMark.objects.using(alias).filter(**_hwm_scope(run))

    def cas() -> None:
        updated = scope.filter(generation=expected).update(
            generation=generation, checkpoint_digest=digest, updated_at=Now()
        )
        if updated == 1:
            return
        current = scope.values_list("generation", flat=True).first()
        if current is None:
            raise HighWaterMarkMissingError(run_id=run.run_id, generation=generation)
        raise StaleGenerationError(
            run_id=run.run_id, expected_generation=expected, hwm_generation=current
        )

    try:
        if alias == DEFAULT_DB_ALIAS:
            cas()  # inside the caller's transaction: commits (or rolls back) with the fence
        else:
            with transaction.atomic(using=alias):
                cas()  # commits here: the commit point
    except _HWM_DB_ERRORS as exc:
        raise HighWaterMarkMissingError(
            f"the high-water mark store is unavailable ({type(exc).__name__}): nothing committed",
            run_id=run.run_id,
            alias=alias,
        ) from None


# --- services -------------------------------------------------------------------------------


def checkpoint_commit(
    *,
    lease: Lease,
    state: RunState,
    expected_generation: int,
    events: Sequence[tuple[str, dict[str, Any]]] = (),
    environment_version: str = "",
) -> CommitResult:
    """Commit ``state`` as generation ``expected_generation + 1`` (DESIGN.md section 4).

    See the module docstring for the protocol and why it is crash-safe.

    Args:
        lease: the caller's current lease (its ``state_version`` must match the run row).
        state: the run state to checkpoint; its identity must match the run.
        expected_generation: the generation the caller restored or last committed (>= 0).
        events: trace events ``(event_type, payload)`` to append in the commit transaction.
        environment_version: environment version recorded on those events; defaults to
            ``state.environment.version``.

    Returns:
        :class:`CommitResult` with the lease's advanced ``state_version``.

    Raises:
        CanonicalizationError / CheckpointSchemaError / CheckpointInvariantError: invalid state or
            event payload; nothing written.
        IdentityMismatchError / ScenarioMismatchError: the state belongs to another run.
        RunNotFoundError: no such run.
        LeaseLostError: the lease was taken over, expired or ``state_version`` moved on.
        StaleGenerationError: the HWM is not at ``expected_generation``.
        HighWaterMarkMissingError: the HWM row or store is missing.
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
    raw, envelope = seal(state, generation=generation, keyring=keyring)
    checked_events = _check_events(events)
    run = _load_run(lease.run_id)
    _check_identity(run, envelope)
    digest = envelope_digest(raw)
    env_version = environment_version or envelope.payload.environment.version

    with transaction.atomic():
        # Same bytes already stored (a retried commit): the row is content-addressed, reuse it.
        if not Checkpoint.objects.filter(run_id=run.run_id, digest=digest).exists():
            Checkpoint(
                run_id=run.run_id,
                generation=generation,
                envelope=raw,
                digest=digest,
                key_id=envelope.key_id,
                schema_version=envelope.schema_version,
                lease_version=lease.lease_version,
            ).save()
    crash_point(AFTER_APPEND)

    with transaction.atomic():
        fenced = Run.objects.filter(held_by(lease), state_version=lease.state_version).update(
            state_version=F("state_version") + 1,
            phase=envelope.payload.phase.value,
            stop_reason=envelope.payload.stop_reason.value if envelope.payload.stop_reason else "",
            generation=generation,
            updated_at=Now(),
        )
        if fenced != 1:
            raise _explain_fence(lease)
        crash_point(BEFORE_HWM_CAS)
        _hwm_cas(run, expected=expected_generation, generation=generation, digest=digest)
        crash_point(AFTER_HWM_CAS)
        for event_type, payload in checked_events:
            trace_append_txn(
                run_id=run.run_id,
                event_type=event_type,
                payload=payload,
                environment_version=env_version,
            )
        trace_append_txn(
            run_id=run.run_id,
            event_type="checkpoint.committed",
            payload={
                "generation": generation,
                "digest": digest,
                "key_id": envelope.key_id,
                "lease_version": lease.lease_version,
                "state_version": lease.state_version + 1,
                "phase": envelope.payload.phase.value,
            },
            environment_version=envelope.payload.environment.version,
        )
    logger.debug(
        "run %s: committed generation %d (digest %s, key id %s, lease version %d)",
        run.run_id,
        generation,
        digest,
        envelope.key_id,
        lease.lease_version,
    )
    return CommitResult(
        lease=replace(lease, state_version=lease.state_version + 1),
        generation=generation,
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
    _check_events(events)
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
    alias = hwm_alias()
    try:
        with transaction.atomic(using=alias):
            HighWaterMark.objects.using(alias).create(
                task_id=ident.task_id,
                run_id=run_id,
                environment_instance_id=state.environment.instance_id,
                generation=0,
                checkpoint_digest="",
            )
    except IntegrityError:
        raise RunExistsError(
            "a high-water mark for this run already exists", run_id=run_id
        ) from None
    except _HWM_DB_ERRORS as exc:
        raise HighWaterMarkMissingError(
            f"the high-water mark store is unavailable ({type(exc).__name__})",
            run_id=run_id,
            alias=alias,
        ) from None
    return checkpoint_commit(lease=lease, state=state, expected_generation=0, events=events)


def checkpoint_hwm(*, run_id: str) -> HighWaterMarkInfo:
    """The run's high-water mark.

    Raises:
        RunNotFoundError: no such run.
        HighWaterMarkMissingError: the HWM row, table or database is missing.
    """
    return _read_hwm(_load_run(run_id))


def checkpoint_restore(
    *,
    run_id: str,
    scenario_fingerprint: str,
    task_version: str | None = None,
    policy_version: str | None = None,
    versions: VersionSet | None = None,
) -> Restored:
    """Load and verify the run's committed checkpoint (DESIGN.md section 4).

    Args:
        run_id: the run.
        scenario_fingerprint: the externally fixed scenario fingerprint the caller expects.
        task_version, policy_version: if given, must equal the checkpoint's.
        versions: if given, the version combination must equal the checkpoint's.

    Raises:
        RunNotFoundError: no such run.
        HighWaterMarkMissingError: HWM row, table or database missing (fail closed).
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
    run = _load_run(run_id)
    hwm = _read_hwm(run)
    if hwm.generation == 0:
        raise CheckpointNotFoundError("the run has no committed checkpoint yet", run_id=run_id)
    raw = _committed_bytes(run, hwm)
    envelope = _open(raw, run_id=run_id, generation=hwm.generation)
    return _verify_restored(
        run=run,
        hwm=hwm,
        envelope=envelope,
        raw=raw,
        scenario_fingerprint=scenario_fingerprint,
        task_version=task_version,
        policy_version=policy_version,
        versions=versions,
    )


def checkpoint_restore_offered(
    *,
    run_id: str,
    raw: bytes,
    scenario_fingerprint: str,
    task_version: str | None = None,
    policy_version: str | None = None,
    versions: VersionSet | None = None,
) -> Restored:
    """Verify envelope bytes offered from outside the store (a backup, a copy, a message).

    Same checks as :func:`checkpoint_restore`; an authentic envelope whose generation or digest is
    not the HWM's raises :class:`RollbackError`.

    Args:
        raw: the envelope bytes (canonical JSON).
        others: as :func:`checkpoint_restore`.

    Raises:
        as :func:`checkpoint_restore`.
    """
    run = _load_run(run_id)
    hwm = _read_hwm(run)
    envelope = _open(bytes(raw), run_id=run_id, generation=None)
    return _verify_restored(
        run=run,
        hwm=hwm,
        envelope=envelope,
        raw=bytes(raw),
        scenario_fingerprint=scenario_fingerprint,
        task_version=task_version,
        policy_version=policy_version,
        versions=versions,
    )


def checkpoint_verify(*, run_id: str) -> Restored:
    """Verify the committed checkpoint without knowing the caller's scenario (for the CLI).

    Checks the MAC, schema, invariants, HWM generation and digest, identity, and that the scenario
    fingerprint matches the one recorded on the run row.

    Raises:
        as :func:`checkpoint_restore`.
    """
    run = _load_run(run_id)
    return checkpoint_restore(run_id=run_id, scenario_fingerprint=run.scenario_fingerprint)


def checkpoint_inspect(*, run_id: str, generation: int | None = None) -> list[CheckpointReport]:
    """Every stored checkpoint row of a run (or of one generation), verified one by one.

    Never raises for a bad row: its ``status`` carries the error text. Key material is never
    part of a report.

    Raises:
        RunNotFoundError: no such run.
    """
    run = _load_run(run_id)
    try:
        hwm: HighWaterMarkInfo | None = _read_hwm(run)
    except HighWaterMarkMissingError:
        hwm = None
    try:
        keyring = keyring_for(TrustRoot.CHECKPOINT)
        keyring_error = ""
    except RatchetError as exc:
        keyring, keyring_error = None, str(exc)
    rows = Checkpoint.objects.filter(run_id=run_id)
    if generation is not None:
        rows = rows.filter(generation=generation)
    reports = []
    for row in rows.order_by("generation", "id"):
        raw = bytes(row.envelope)
        actual = digest_bytes(raw)
        committed = hwm is not None and hwm.generation == row.generation and hwm.digest == actual
        if keyring is None:
            status = keyring_error
        else:
            try:
                _open(raw, run_id=run_id, generation=row.generation, keyring=keyring)
            except RatchetError as exc:
                status = str(exc)
            else:
                status = (
                    "valid"
                    if actual == row.digest
                    else "stored bytes do not match the row's digest"
                )
        try:
            shown = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            shown = None
        reports.append(
            CheckpointReport(
                generation=row.generation,
                digest=row.digest,
                key_id=row.key_id,
                schema_version=row.schema_version,
                lease_version=row.lease_version,
                created_at=row.created_at,
                committed=committed,
                status=status,
                envelope=shown if isinstance(shown, dict) else None,
            )
        )
    return reports
