"""Checks a stored or offered checkpoint envelope against its run and high-water mark.

Restore (``runtime.checkpoints.protocol.checkpoint_restore``, and :func:`checkpoint_restore_offered` for
bytes from outside the store) accepts only the envelope whose generation equals the HWM's and
whose bytes hash to the HWM's digest; its MAC, schema and invariants must verify
(``open_envelope``), and its identity, scenario fingerprint and versions must be the run's
(DESIGN.md section 4, Freshness; section 7, "valid HMAC taken as latest"). Each failure is a
typed error naming the run and generation; nothing here writes. The restore's reads of the run
row and of the committed bytes live here too, compiled once per process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import router

from runtime.checkpoints.high_water_marks import HighWaterMarkInfo, hwm_read
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import RunState, VersionSet
from runtime.core.derived_rows import run_row_disagreement
from runtime.core.envelope import CheckpointEnvelope, open_envelope
from runtime.core.signing import Keyring, TrustRoot
from runtime.database.statements import compiled_rows
from runtime.errors import (
    CheckpointCorruptError,
    CheckpointNotFoundError,
    DerivedRowMismatchError,
    IdentityMismatchError,
    RatchetError,
    RollbackError,
    RunNotFoundError,
    ScenarioMismatchError,
    SigningError,
    VersionMismatchError,
)
from runtime.keys import keyring_for
from runtime.models import Checkpoint, Run

logger = logging.getLogger("runtime.checkpoints.checks")


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


def run_load(*, run_id: str) -> Run:
    """The run row whose checkpoints are committed or checked.

    Raises:
        RunNotFoundError: no such run.
    """
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    return run


def stored_envelope_open(
    *, raw: bytes, run_id: str, generation: int | None, keyring: Keyring | None = None
) -> CheckpointEnvelope:
    """``open_envelope`` whose errors always name the run and generation the bytes were stored
    under: the core knows only the key id, an operator needs to know which row to look at.

    Args:
        raw: the envelope bytes.
        run_id, generation: where the bytes were stored (``generation`` None: not known).
        keyring: the checkpoint keyring; defaults to the configured one.

    Raises:
        everything ``open_envelope`` raises, with ``run_id`` and ``generation`` added.
    """
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


def run_identity_check(*, run: Run, envelope: CheckpointEnvelope) -> None:
    """The envelope must belong to exactly this run row (and so to its HWM scope).

    Raises:
        IdentityMismatchError: run, tenant, task, environment instance, task or policy differ.
        ScenarioMismatchError: the scenario fingerprint is not the one the run started with.
    """
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


def restored_verify(
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
    """Check an opened envelope against the run row, its HWM and what the caller expects.

    Args:
        run: the run row; hwm: its high-water mark.
        envelope: the opened (MAC-verified) envelope; raw: its bytes.
        scenario_fingerprint: the scenario fingerprint the caller expects.
        task_version, policy_version, versions: if not None, must equal the checkpoint's.

    Raises:
        IdentityMismatchError / ScenarioMismatchError: see :func:`run_identity_check`, or the
            caller's fingerprint differs.
        RollbackError: the envelope is not the HWM's generation and digest.
        VersionMismatchError: task/policy version or version set differ.
    """
    run_identity_check(run=run, envelope=envelope)
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
    state = envelope.payload
    finding = run_row_disagreement(
        row_phase=run.phase, row_stop_reason=run.stop_reason, row_generation=run.generation,
        signed_phase=state.phase.value, signed_stop_reason=state.stop_reason.value if state.stop_reason else "",
        signed_generation=envelope.generation)
    if finding is not None:
        # The row is what the sweeper, the workers' task, the lists and the queues filter on;
        # acting on a restore whose row was edited would let those keep disagreeing with what
        # runs (DESIGN.md section 4.10).
        raise DerivedRowMismatchError(finding, run_id=run.run_id, generation=envelope.generation,
                                      row=run.phase, signed=state.phase.value)
    if run.generation != hwm.generation:
        logger.warning(
            "run %s: the run row says generation %d but the HWM says %d (a commit raced this "
            "read, or an earlier release's commit stopped after its mark moved)",
            run.run_id,
            run.generation,
            hwm.generation,
        )
    return Restored(
        state=envelope.payload,
        generation=envelope.generation,
        digest=digest,
        envelope=envelope,
        state_version=run.state_version,
    )


_RUN_COLUMNS = tuple(f.attname for f in Run._meta.concrete_fields)


def run_row_read(*, run_id: str) -> Run:
    """:func:`run_load` through a SELECT compiled once per process (``runtime.database.statements``):
    every restore reads the run row, and building the query cost more than running it.

    Raises:
        RunNotFoundError: no such run.
    """
    alias = router.db_for_read(Run)
    rows = compiled_rows(alias=alias, shape=("run_row",), slots={"run_id": run_id},
                         build=lambda s: Run.objects.filter(run_id=s["run_id"])
                         .values_list(*_RUN_COLUMNS))
    if not rows:
        raise RunNotFoundError(run_id=run_id)
    return Run.from_db(alias, _RUN_COLUMNS, rows[0])


def committed_bytes_read(*, run: Run, hwm: HighWaterMarkInfo) -> bytes:
    """The stored bytes of the committed generation that hash to the HWM's digest, read through
    a SELECT compiled once per process; when none does, :func:`committed_bytes_load` reads them
    again and says precisely why (missing, forged, rolled back, corrupt).

    Raises:
        as :func:`committed_bytes_load`.
    """
    rows = compiled_rows(alias=router.db_for_read(Checkpoint), shape=("committed_bytes",),
                         slots={"run_id": run.run_id, "generation": hwm.generation},
                         build=lambda s: Checkpoint.objects.filter(
                             run_id=s["run_id"], generation=s["generation"])
                         .order_by("id").values_list("envelope"))
    for (envelope,) in rows:
        raw = bytes(envelope)
        if digest_bytes(raw) == hwm.digest:
            return raw
    return committed_bytes_load(run=run, hwm=hwm)


def committed_bytes_load(*, run: Run, hwm: HighWaterMarkInfo) -> bytes:
    """The stored bytes the HWM committed; fail closed, as precisely as possible, otherwise.

    Raises:
        CheckpointNotFoundError: no row of the committed generation is stored.
        SigningError / CheckpointError subclasses: no row hashes to the HWM's digest and opening
            the suspects says why (a forged MAC first).
        RollbackError: a validly signed but non-committed envelope stands in for the committed one.
        CheckpointCorruptError: no row hashes to the HWM's digest, for no more precise reason.
    """
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
            stored_envelope_open(
                raw=raw, run_id=run.run_id, generation=hwm.generation, keyring=keyring
            )
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

    Same checks as ``runtime.checkpoints.protocol.checkpoint_restore``; an authentic envelope whose
    generation or digest is not the HWM's raises :class:`RollbackError`.

    Args:
        raw: the envelope bytes (canonical JSON).
        others: as ``runtime.checkpoints.protocol.checkpoint_restore``.

    Raises:
        as ``runtime.checkpoints.protocol.checkpoint_restore``.
    """
    run = run_load(run_id=run_id)
    hwm = hwm_read(run=run)
    envelope = stored_envelope_open(raw=bytes(raw), run_id=run_id, generation=None)
    return restored_verify(
        run=run,
        hwm=hwm,
        envelope=envelope,
        raw=bytes(raw),
        scenario_fingerprint=scenario_fingerprint,
        task_version=task_version,
        policy_version=policy_version,
        versions=versions,
    )
