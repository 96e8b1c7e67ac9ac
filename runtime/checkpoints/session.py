"""The run session: a run restored under its lease, and the fenced commit of its next checkpoint.

Everything that changes a run -- the step engine, the approval service, a reviewer's decision --
does it inside a session (DESIGN.md section 4, Ownership and the commit protocol): take the
run's lease (the fencing token), restore the newest checkpoint (fail closed on anything that
does not verify, including approval and decision evidence: DESIGN.md section 6), change the
state, commit it as the next generation fenced by that lease, release the lease. A worker that
lost its lease stops at its next commit, and the adapter refuses its stale fencing token.

This module knows nothing about what a step decides: the engine (``runtime.engine``), the
approval service (``runtime.decisions.approvals``) and the review service (``runtime.decisions.reviews``) build on
it, and it imports none of them.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from runtime.adapters.base import Adapter, Observation
from runtime.adapters.factory import open_adapter
from runtime.checkpoints.approval_checks import evidence_verify
from runtime.checkpoints.cases import case_sync
from runtime.checkpoints.protocol import CommitResult, checkpoint_commit, checkpoint_restore
from runtime.checkpoints.scenario import stored_scenario
from runtime.core.checkpoint import TERMINAL_PHASES, EnvironmentRef, RunState, VersionSet
from runtime.errors import MarkPendingError, RunSpecMissingError
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.models import Run
from runtime.ownership.environments import adapter_bind
from runtime.ownership.heartbeats import LeaseHeartbeat
from runtime.ownership.leases import Lease, lease_acquire_waiting, lease_check, lease_release
from runtime.planners.base import Planner
from runtime.planners.factory import build_planner
from runtime.taskspec import TaskSpec
from runtime.taskspec.plugin_pins import plugin_pins_check


def default_worker_id() -> str:
    """``RATCHET_WORKER_ID`` or ``<hostname>:<pid>``: unique per process, so leases tell workers apart."""
    return os.environ.get("RATCHET_WORKER_ID") or f"{socket.gethostname()}:{os.getpid()}"


def person_worker_id(*, role: str, person: str) -> str:
    """``<role>:<person>:<random>``, the lease holder of one call made by a person (``approver``,
    ``reviewer``): unique per call, so two sessions (tabs) of one person never share a lease and
    the second is refused with ``LeaseHeldError`` naming the first instead of silently fencing it
    off (DESIGN.md section 6.6). ``person`` is cut to 150 characters so the name fits the lease
    holder column (200)."""
    return f"{role}:{person[:150]}:{uuid.uuid4().hex[:12]}"


@dataclass
class RunSession:
    """A run restored under a held lease: what a step, an approval or a decision works on.

    Attributes:
        run: the run's row as loaded (its columns may be stale after a commit; ``state`` is not).
        worker: the worker id holding ``lease``.
        lease: the held lease; every commit replaces it (the state version advances).
        state: the restored state, changed in place and committed by :func:`session_commit`.
        generation: the newest committed generation.
        spec: the task spec stored with the run.
        target: the environment the run acts on (a directory or a git clone).
        base_dir: the directory the spec's relative paths are resolved against.
        adapter: the adapter for ``target``.
        planner: the planner the spec names.
        ttl: lease time to live in seconds, for renewals.
        steps: checkpoints committed in this session.
        last_tick: ``time.monotonic()`` at the last commit, for the wall-time budget (seconds).
        events: event types committed in this session, in order.
        within_commit: writes the next commit runs in its own transaction.
        renewed_at: when the lease was last extended (monotonic seconds).
    """

    run: Run
    worker: str
    lease: Lease
    state: RunState
    generation: int
    spec: TaskSpec
    target: Path
    base_dir: Path
    adapter: Adapter
    planner: Planner
    ttl: float
    steps: int = 0
    last_tick: float = field(default_factory=time.monotonic)
    events: list[str] = field(default_factory=list)
    within_commit: list[Callable[[], None]] = field(default_factory=list)
    """Writes the next commit runs in its transaction (DESIGN.md section 4.3): receipt cache, attachments."""
    renewed_at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the lease was last extended (every commit extends it)."""
    held_until: float = 0.0
    """``time.monotonic()`` before which the lease is certainly unexpired: a commit's send time
    plus the TTL it renewed to (the database set the expiry after the send, by its own clock);
    0 until this session commits (:func:`session_lease_check`)."""
    proposed_blobs: dict[str, bytes] = field(default_factory=dict)
    """``digest -> bytes`` the planner handed over for the newest proposal of this session."""
    released: bool = False
    """The lease was given up, by a commit into a terminal phase (:func:`session_commit`) or by
    :func:`session_release`."""
    mark_pending: bool = False
    """A commit of this session reached its commit point but not its high-water mark: no further
    commit may build on it until a restore completes the mark (DESIGN.md section 4.3)."""
    proposing: dict[str, Any] | None = None
    """The action the planner proposed in this step, before it became the pending write: kept so a
    freeze in between (an adapter refusing to predict it) can show it (DESIGN.md section 6.11)."""

    @property
    def run_id(self) -> str:
        return self.state.identity.run_id


def session_open(*, run_id: str, worker: str, lease: Lease, ttl: float, full_ledger: bool = False) -> RunSession:
    """Restore the newest checkpoint of ``run_id`` under ``lease`` (already acquired).

    ``full_ledger``: verify every receipts-ledger entry, not only those this process has not
    verified yet (a recovery or a person's resume, DESIGN.md section 4.15).

    The scenario fingerprint, task, policy and component versions are recomputed from the spec
    stored with the run and must match the checkpoint's (DESIGN.md section 4); approval and
    decision evidence must verify; case rows a crash left behind are repaired.

    Raises:
        CheckpointError subclasses: restore failed closed.
        KeyringError / UnknownKeyError / BadSignatureError: evidence does not verify.
        PluginVersionMismatchError: a plug-in is not the one pinned with the run (DESIGN.md
            section 5.10); PluginError subclasses: a plug-in cannot be found, imported or built.
    """
    run = Run.objects.get(run_id=run_id)
    stored = run.spec or {}
    spec, scenario = stored_scenario(stored=stored)
    base_dir = Path(stored["base_dir"])
    target = Path(stored["target"])
    initial = stored["initial"]
    plugin_pins_check(run_id=run_id, pinned=stored.get("plugins"), spec=spec)
    adapter = open_adapter(spec.environment.adapter, target, entry=spec.environment.entry,
                           options=spec.environment.options)
    # Every observation, look-up and write checks the registered location first (section 5.4);
    # every look-up by key raises the adapter's fence to this lease's token first (section 4.6).
    adapter = adapter_bind(adapter, instance_id=run.environment_instance_id, kind=str(initial.get("kind", "")),
                           target=target, fencing_token=lease.lease_version)
    restored = checkpoint_restore(
        run_id=run_id,
        scenario_fingerprint=scenario,
        task_version=spec.task.version,
        policy_version=spec.policy.version,
        versions=VersionSet(**spec.versions.model_dump()),
        full_ledger=full_ledger,
    )
    evidence_verify(restored.state)
    case_sync(run_id=run_id, state=restored.state)
    planner = build_planner(spec, base_dir=base_dir)
    lease = Lease(run_id=lease.run_id, worker=lease.worker, lease_version=lease.lease_version,
                  state_version=restored.state_version, expires_at=lease.expires_at)
    return RunSession(run=run, worker=worker, lease=lease, state=restored.state, generation=restored.generation,
                      spec=spec, target=target, base_dir=base_dir, adapter=adapter, planner=planner, ttl=ttl)


@contextmanager
def run_session(*, run_id: str, worker: str, ttl_seconds: float | None = None,
                wait_seconds: float = 5.0) -> Iterator[RunSession]:
    """Hold the run's lease, restore its latest checkpoint, yield the session, release the lease.

    Used by approval and review services to change a frozen run under the same fencing rules as
    the engine (every commit is fenced by this lease).

    Raises:
        LeaseHeldError: another worker still holds the lease after ``wait_seconds`` seconds.
        CheckpointError subclasses: restore failed closed.
    """
    ttl = ttl_seconds or settings.RATCHET_LEASE_SECONDS
    lease = lease_acquire_waiting(run_id=run_id, worker=worker, ttl_seconds=ttl, wait_seconds=wait_seconds)
    try:
        session = session_open(run_id=run_id, worker=worker, lease=lease, ttl=ttl)
    except BaseException:
        lease_release(lease=lease)
        raise
    try:
        yield session
    finally:
        session_release(session)


def session_release(session: RunSession) -> None:
    """Give the session's lease up (tracing ``lease.released`` in the same transaction), unless
    the run's last commit already did.

    Raises:
        LeaseLostError: another worker (or a newer acquisition) holds the lease now.
    """
    if not session.released:
        lease_release(lease=session.lease)
        session.released = True


def session_blob_put(session: RunSession, data: bytes) -> str:
    """Store a planner's blob (its row in the next commit, DESIGN.md section 4.3) and keep the
    bytes in the session for the prediction and the write of the same proposal.

    Returns:
        The digest ``"sha256:<hex>"``.

    Raises:
        TypeError / AttachmentError: as :func:`runtime.evidence.attachments.attachment_put`.
    """
    digest = attachment_put(data=data, row_writes=session.within_commit)
    session.proposed_blobs[digest] = bytes(data)
    return digest


def session_blob(session: RunSession, digest: str) -> bytes:
    """A blob by digest: the session's copy when this session's planner handed it over (the
    adapter checks every digest it is given again), else from attachment storage.

    Raises:
        AttachmentError / DigestFormatError: as :func:`runtime.evidence.attachments.attachment_get`.
    """
    kept = session.proposed_blobs.get(digest)
    return kept if kept is not None else attachment_get(digest=digest)


def session_commit(session: RunSession, *events: tuple[str, dict[str, Any]]) -> None:
    """Commit the session's state as the next checkpoint with ``events`` in the trace.

    Adds the wall time since the last commit to the run's usage, and advances the session's
    lease and generation to the committed ones (DESIGN.md section 4, commit protocol). A state in
    a terminal phase (completed, failed, cancelled) is the run's last commit: it also releases
    the lease (``session.released``).

    Raises:
        LeaseLostError / StaleGenerationError: another worker took the run over; stop.
        MarkPendingError: committed, its high-water mark not moved (the session is advanced).
    """
    if session.mark_pending:
        raise MarkPendingError("an earlier commit of this session is not recorded by its high-water mark; "
                               "nothing more is committed until a restore completes the mark",
                               run_id=session.run_id, generation=session.generation)
    now = time.monotonic()
    session.state.usage.wall_seconds = round(session.state.usage.wall_seconds + (now - session.last_tick), 6)
    session.last_tick = now
    within, session.within_commit = session.within_commit, []
    # One transaction (DESIGN.md section 4.3): the fence also extends the lease, so the step loop
    # needs no renewal transaction of its own while commits keep coming; a terminal phase is the
    # run's last commit, and the same UPDATE gives the lease up.
    release = session.state.phase in TERMINAL_PHASES
    try:
        result = checkpoint_commit(lease=session.lease, state=session.state,
                                   expected_generation=session.generation, events=list(events),
                                   environment_version=session.state.environment.version,
                                   renew_seconds=session.ttl, within=within, release=release)
    except MarkPendingError as exc:
        # Committed, its mark not moved: the session holds what was committed, so whatever
        # releases it next (run_session, the engine) sees the lease as it now is.
        _session_committed(session, exc.committed, now=now, events=events, released=release)
        session.mark_pending = True
        raise
    _session_committed(session, result, now=now, events=events, released=release)


def _session_committed(session: RunSession, result: CommitResult, *, now: float,
                       events: tuple[tuple[str, dict[str, Any]], ...], released: bool) -> None:
    session.released = released
    session.renewed_at = now
    # ``now`` was read before the commit was sent, so the expiry the commit set (the database's
    # now + ttl, on a clock that had already passed the send) lies after now + ttl locally.
    session.held_until = 0.0 if released else now + session.ttl
    session.lease = result.lease
    session.generation = result.generation
    session.steps += 1
    session.events.extend(e[0] for e in events)


def session_lease_check(session: RunSession) -> None:
    """Confirm the session still holds its lease before an adapter call (DESIGN.md section 4.5).

    While less than half of the TTL has passed since the session's last commit renewed the lease,
    the lease cannot have expired, and only an expired lease can be taken over, so no read is
    needed; later, :func:`runtime.ownership.leases.lease_check` asks the database. Like that read,
    this only narrows the window: the adapter's fencing token and the commit's fence close it.

    Raises:
        LeaseLostError: the database says the lease is gone.
    """
    if time.monotonic() < session.held_until - session.ttl / 2:
        return
    lease_check(lease=session.lease)


@contextmanager
def session_heartbeat(session: RunSession) -> Iterator[LeaseHeartbeat]:
    """Keep the session's lease while one long adapter or model call runs (DESIGN.md section 4.9).

    Renews every third of the session's TTL for at most ``RATCHET_MAX_CALL_SECONDS`` seconds;
    the renewed lease replaces the session's when the block ends. Yields the heartbeat, whose
    ``lost`` event says the lease is gone.
    """
    beat = LeaseHeartbeat(session.lease, ttl_seconds=session.ttl, max_seconds=settings.RATCHET_MAX_CALL_SECONDS)
    with beat:
        yield beat
    if beat.beats:
        session.lease = beat.lease
        session.renewed_at = time.monotonic()


# --- observations -------------------------------------------------------------------------------


def store_observation(obs: Observation, *, observation_version: int, adapter_generation: int = 0,
                      row_writes: list[Callable[[], None]] | None = None) -> EnvironmentRef:
    """Store an observation's attachments content-addressed and return its checkpoint reference.

    ``row_writes``: a session's ``within_commit``, so the attachment rows are written by the
    next checkpoint commit's transaction (DESIGN.md section 4.3).
    """
    digests = [attachment_put(data=data, content_type="text/plain", row_writes=row_writes)
               for _, data in sorted(obs.attachments.items())]
    return obs.ref(adapter_generation=adapter_generation, observation_version=observation_version,
                   attachment_digests=digests)


def observation_matches(obs: Observation, ref: EnvironmentRef) -> bool:
    """Whether ``obs`` shows the version and content fingerprint ``ref`` recorded."""
    return obs.version == ref.version and obs.state_fingerprint == ref.state_fingerprint


def observation_json(obs: Observation) -> dict[str, str]:
    """The identifying fields of an observation, as a trace or case payload keeps them."""
    return {"instance_id": obs.instance_id, "version": obs.version, "state_fingerprint": obs.state_fingerprint}


def adapter_for_run(run: Run) -> Adapter:
    """Open the adapter a run acts on (from the spec stored with the run); read-only use is safe
    without the lease, writes need one.

    Raises:
        RunSpecMissingError: the run has no stored task spec or target (named in ``missing``).
    """
    stored = run.spec or {}
    missing = [key for key in ("task", "target") if not stored.get(key)]
    if missing:
        raise RunSpecMissingError(run_id=run.run_id, missing=", ".join(missing))
    spec = TaskSpec.from_json(stored["task"])
    return open_adapter(spec.environment.adapter, Path(stored["target"]), entry=spec.environment.entry,
                        options=spec.environment.options)
