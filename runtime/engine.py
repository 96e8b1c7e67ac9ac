"""The step engine: drives a run through the DESIGN.md section 5-6 state machine, exactly once.

One *step* is one of: propose the next write and checkpoint its intent; execute (or reconcile) the
pending write and checkpoint the receipt; or verify completion. Every step ends in a checkpoint
commit (``runtime.checkpoints.checkpoint_commit``), which is fenced by the lease, so a worker that
lost its lease stops at its next commit and the adapter refuses its stale fencing token.

Crash windows (DESIGN.md section 5 table) and how :func:`run_advance` recovers from each:

=========================================  ===================================================
crash point                                 recovery
=========================================  ===================================================
before proposing                            re-observe, then decide (planner is deterministic)
intent persisted, no side-effect evidence   query the adapter by key; none -> execute with the
                                            same key (pre-state must still hold)
external success, receipt not persisted     query the adapter by key; found -> reconcile, never
                                            execute again
receipt persisted, state not advanced       replay the deterministic transition from the receipt
=========================================  ===================================================

Anything the engine cannot explain freezes the run in ``needs_review`` with a review case; it never
guesses (fail closed).
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.db import transaction

from runtime.adapters import open_adapter
from runtime.adapters.base import Adapter, Observation
from runtime.approvals import approval_problem, evidence_verify, receipt_trust_problem
from runtime.attachments import attachment_get, attachment_put
from runtime.checkpoints import checkpoint_commit, checkpoint_restore, run_create
from runtime.core.checkpoint import (
    TERMINAL_PHASES,
    BudgetLimits,
    EnvironmentRef,
    ExecutedWrite,
    PendingAction,
    Phase,
    Receipt,
    ReviewCaseRef,
    RunIdentity,
    RunState,
    Scope,
    StopReason,
    VerifierResult,
    VersionSet,
)
from runtime.core.crashpoints import crash_point, register
from runtime.core.evidence import approval_digest
from runtime.core.idempotency import compare_receipts, derive_key
from runtime.core.statemachine import Event, transition
from runtime.errors import (
    AdapterError,
    AdapterTimeoutError,
    EngineError,
    LeaseHeldError,
    PolicyViolationError,
    RunNotFoundError,
)
from runtime.leases import Lease, lease_acquire, lease_check, lease_release, lease_renew
from runtime.models import Run
from runtime.planners.base import Done, Planner, build_planner
from runtime.receipts import receipt_cache_get, receipt_cache_put
from runtime.reviews import case_open, case_sync, review_case_id
from runtime.taskspec import (
    TaskSpec,
    load_task_spec,
    needs_approval,
    policy_check,
    scenario_fingerprint,
)
from runtime.trace import trace_append
from runtime.verifiers import verify

log = logging.getLogger("runtime.engine")

CP_BEFORE_PROPOSE = register("engine.before_propose", "observed, about to ask the planner")
CP_AFTER_INTENT = register("engine.after_intent_commit", "pending intent checkpointed, no side effect yet")
CP_BEFORE_EXECUTE = register("engine.before_execute", "lease re-checked, about to call adapter.execute")
CP_AFTER_EXECUTE = register("engine.after_execute", "adapter returned a receipt, nothing persisted yet")
CP_AFTER_CACHE = register("engine.after_receipt_cache", "receipt in the idempotency cache, state not advanced")
CP_AFTER_STEP = register("engine.after_step_commit", "write recorded and state advanced")
CP_BEFORE_VERIFY = register("engine.before_verify", "planner said done, verifier not run yet")

MAX_UNKNOWN_OUTCOME_ATTEMPTS = 3
"""Timeouts on one pending write before the run freezes for a human (outcome stays unknown)."""


def default_worker_id() -> str:
    """``RATCHET_WORKER_ID`` or ``<hostname>:<pid>``: unique per process, so leases tell workers apart."""
    return os.environ.get("RATCHET_WORKER_ID") or f"{socket.gethostname()}:{os.getpid()}"


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class StepReport:
    """What one call of :func:`run_advance` did. ``steps`` counts committed checkpoints."""

    run_id: str
    phase: str
    stop_reason: str | None
    steps: int
    generation: int
    cursor: int
    recovered: bool = False
    events: list[str] = field(default_factory=list)


@dataclass
class _Ctx:
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

    @property
    def run_id(self) -> str:
        return self.state.identity.run_id


# --- run creation ---------------------------------------------------------------------------


def run_start(*, spec_path: str | Path, worker: str | None = None, ttl_seconds: float | None = None,
              tenant_id: str | None = None) -> str:
    """Create a run from a task spec file and checkpoint generation 1; returns the run id.

    Prepares the environment if the spec asks for it (a fresh clone at the replay base), observes
    it, computes the scenario fingerprint over spec + initial state (DESIGN.md section 4), and
    commits the first checkpoint under a fresh lease, which is released at once: driving the run
    is :func:`run_advance`'s job.

    Raises:
        TaskSpecError: the spec file is invalid.
        PlannerError / AdapterError: the environment cannot be prepared or observed.
    """
    from django.conf import settings

    spec_file = Path(spec_path).resolve()
    spec = load_task_spec(spec_file)
    base_dir = spec_file.parent
    ttl = ttl_seconds or settings.RATCHET_LEASE_SECONDS
    worker = worker or default_worker_id()
    run_id = uuid.uuid4().hex
    target = spec.resolve_target(base_dir)
    if spec.environment.setup != "none":
        # A prepared environment is new for every run: the run id names its directory.
        target = target / run_id
        spec = spec.model_copy(update={"environment": spec.environment.model_copy(update={"target": str(target)})})
    planner = build_planner(spec, base_dir=base_dir)
    planner.prepare_environment(target)
    adapter = open_adapter(spec.environment.adapter, target)
    obs = adapter.observe()
    scenario = scenario_fingerprint(spec, obs)
    env_ref = store_observation(obs, observation_version=1)
    policy = spec.policy
    state = RunState(
        identity=RunIdentity(
            run_id=run_id,
            tenant_id=tenant_id or spec.task.tenant,
            task_id=spec.task.id,
            task_version=spec.task.version,
            policy_id=policy.id,
            policy_version=policy.version,
            scenario_fingerprint=scenario,
        ),
        versions=VersionSet(**spec.versions.model_dump()),
        phase=Phase.RUNNING,
        limits=BudgetLimits(**policy.budgets.model_dump()),
        environment=env_ref,
        scope=Scope(
            allowed_actions=list(policy.allowed_actions),
            allowed_paths=list(policy.allowed_paths),
            permissions=list(policy.permissions),
            approval_risks=list(policy.approval_risks),
            principal=f"agent@{tenant_id or spec.task.tenant}",
            policy_version=policy.version,
            preconditions=[],
        ),
        planner_state=planner.init_state(),
        started_at=_now(),
    )
    stored_spec = {
        "task": spec.model_dump(mode="json"),
        "base_dir": str(base_dir),
        "target": str(target),
        "initial": {"instance_id": obs.instance_id, "version": obs.version,
                    "state_fingerprint": obs.state_fingerprint, "kind": obs.kind},
    }
    result = run_create(
        state=state, worker=worker, ttl_seconds=ttl, spec=stored_spec,
        events=[("run.started", {"task_id": spec.task.id, "task_version": spec.task.version,
                                 "scenario_fingerprint": scenario, "environment": env_ref.model_dump(mode="json")})],
    )
    _release(result.lease, run_id)
    log.debug("run %s created at generation %s", run_id, result.generation)
    return run_id


def store_observation(obs: Observation, *, observation_version: int, adapter_generation: int = 0
                      ) -> EnvironmentRef:
    """Store an observation's attachments content-addressed and return its checkpoint reference."""
    digests = [attachment_put(data=data, content_type="text/plain") for _, data in sorted(obs.attachments.items())]
    return obs.ref(adapter_generation=adapter_generation, observation_version=observation_version,
                   attachment_digests=digests)


def _release(lease: Lease, run_id: str) -> None:
    lease_release(lease=lease)  # traces "lease.released" in the same transaction


# --- driving --------------------------------------------------------------------------------


def run_advance(*, run_id: str, worker: str | None = None, max_steps: int | None = None,
                ttl_seconds: float | None = None, wait_seconds: float = 0.0,
                on_step: Callable[[StepReport], None] | None = None) -> StepReport:
    """Acquire the lease, restore, recover, and drive the run until it stops or ``max_steps``.

    Args:
        run_id: the run to drive.
        worker: this worker's id (defaults to :func:`default_worker_id`).
        max_steps: stop after this many committed steps (None: until the run stops or freezes).
        ttl_seconds: lease time to live in seconds (default ``RATCHET_LEASE_SECONDS``).
        wait_seconds: if another worker holds the lease, retry for up to this long (seconds).
        on_step: called after every committed step (progress bars).

    Returns:
        A :class:`StepReport`. A frozen run (needs_review, awaiting_approval) returns normally.

    Raises:
        RunNotFoundError, LeaseHeldError (after ``wait_seconds``), LeaseLostError /
        StaleGenerationError (another worker took over: stop), CheckpointError subclasses
        (restore failed closed: the run needs a human).
    """
    from django.conf import settings

    worker = worker or default_worker_id()
    ttl = ttl_seconds or settings.RATCHET_LEASE_SECONDS
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    if run.phase in TERMINAL_PHASES:
        return StepReport(run_id=run_id, phase=run.phase, stop_reason=run.stop_reason or None, steps=0,
                          generation=run.generation, cursor=-1)
    lease = _acquire_waiting(run_id=run_id, worker=worker, ttl=ttl, wait_seconds=wait_seconds)
    recovering = _needs_recovery(run_id)
    started = time.monotonic()
    if recovering:
        trace_append(run_id=run_id, event_type="recovery.started", payload={"worker": worker})
    try:
        ctx = _load(run_id=run_id, worker=worker, lease=lease, ttl=ttl)
        _recover_environment(ctx)
    except Exception as exc:
        if recovering:
            trace_append(run_id=run_id, event_type="recovery.failed",
                         payload={"error": type(exc).__name__, "message": str(exc)[:500],
                                  "duration_seconds": round(time.monotonic() - started, 6)})
        raise
    if recovering:
        trace_append(run_id=run_id, event_type="recovery.succeeded",
                     payload={"duration_seconds": round(time.monotonic() - started, 6),
                              "generation": ctx.generation, "phase": ctx.state.phase.value})
    report_recovered = recovering
    _reconcile_waiting(ctx)
    while ctx.state.phase not in TERMINAL_PHASES and ctx.state.phase not in (
        Phase.NEEDS_REVIEW, Phase.AWAITING_APPROVAL
    ):
        if max_steps is not None and ctx.steps >= max_steps:
            break
        _step(ctx)
        if on_step:
            on_step(_report(ctx, report_recovered))
    _release(ctx.lease, run_id)
    return _report(ctx, report_recovered)


def _report(ctx: _Ctx, recovered: bool) -> StepReport:
    s = ctx.state
    return StepReport(run_id=ctx.run_id, phase=s.phase.value,
                      stop_reason=s.stop_reason.value if s.stop_reason else None, steps=ctx.steps,
                      generation=ctx.generation, cursor=s.cursor, recovered=recovered, events=list(ctx.events))


def _acquire_waiting(*, run_id: str, worker: str, ttl: float, wait_seconds: float) -> Lease:
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return lease_acquire(run_id=run_id, worker=worker, ttl_seconds=ttl)
        except LeaseHeldError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def _needs_recovery(run_id: str) -> bool:
    """A resume is a *recovery* when the lease we just took was not released cleanly.

    ``lease_acquire`` records the previous owner in its ``lease.acquired`` event; a clean
    release clears the owner, so a non-empty previous owner means that worker died or stalled.
    """
    from runtime.models import TraceEvent

    payload = (TraceEvent.objects.filter(run_id=run_id, event_type="lease.acquired")
               .order_by("-seq").values_list("payload", flat=True).first())
    return bool(payload and payload.get("previous_owner"))


def _load(*, run_id: str, worker: str, lease: Lease, ttl: float) -> _Ctx:
    run = Run.objects.get(run_id=run_id)
    stored = run.spec or {}
    spec = TaskSpec.from_json(stored["task"])
    base_dir = Path(stored["base_dir"])
    target = Path(stored["target"])
    initial = stored["initial"]
    adapter = open_adapter(spec.environment.adapter, target)
    scenario = scenario_fingerprint(spec, _InitialObservation(**initial))
    restored = checkpoint_restore(
        run_id=run_id,
        scenario_fingerprint=scenario,
        task_version=spec.task.version,
        policy_version=spec.policy.version,
        versions=VersionSet(**spec.versions.model_dump()),
    )
    evidence_verify(restored.state)
    case_sync(run_id=run_id, state=restored.state)
    planner = build_planner(spec, base_dir=base_dir)
    lease = Lease(run_id=lease.run_id, worker=lease.worker, lease_version=lease.lease_version,
                  state_version=restored.state_version, expires_at=lease.expires_at)
    return _Ctx(run=run, worker=worker, lease=lease, state=restored.state, generation=restored.generation,
                spec=spec, target=target, base_dir=base_dir, adapter=adapter, planner=planner, ttl=ttl)


@dataclass(frozen=True)
class _InitialObservation:
    """The initial observation as stored with the run, for recomputing the scenario fingerprint."""

    instance_id: str
    version: str
    state_fingerprint: str
    kind: str


# --- commits and freezes --------------------------------------------------------------------


def _commit(ctx: _Ctx, *events: tuple[str, dict[str, Any]]) -> None:
    now = time.monotonic()
    ctx.state.usage.wall_seconds = round(ctx.state.usage.wall_seconds + (now - ctx.last_tick), 6)
    ctx.last_tick = now
    result = checkpoint_commit(lease=ctx.lease, state=ctx.state, expected_generation=ctx.generation,
                               events=list(events), environment_version=ctx.state.environment.version)
    ctx.lease = result.lease
    ctx.generation = result.generation
    ctx.steps += 1
    ctx.events.extend(e[0] for e in events)


def _freeze(ctx: _Ctx, event: Event, reason: StopReason, detail: str, *, receipt: Receipt | None = None,
            extra: dict[str, Any] | None = None) -> None:
    """Freeze the run in needs_review with a review case that keeps all the evidence (section 6)."""
    state = ctx.state
    pending = state.pending
    case = ReviewCaseRef(
        # Derived from the generation this freeze commits, so a crash before the commit and a
        # second freeze after recovery open the same case instead of two.
        case_id=review_case_id(run_id=ctx.run_id, generation=ctx.generation + 1),
        reason=reason,
        idempotency_key=pending.idempotency_key if pending else None,
        intent_digest=pending.intent_digest if pending else None,
        receipt=receipt,
        receipt_fingerprint=receipt.fingerprint() if receipt else None,
        environment_version=state.environment.version,
        opened_at=_now(),
    )
    state.phase = transition(state.phase, event)
    state.stop_reason = reason
    state.stop_detail = detail[:4000]
    state.review_cases.append(case)
    payload: dict[str, Any] = {
        "case_id": case.case_id,
        "reason": reason.value,
        "detail": detail,
        "pending": pending.model_dump(mode="json") if pending else None,
        "receipt": receipt.model_dump(mode="json") if receipt else None,
        "receipt_fingerprint": case.receipt_fingerprint,
        "environment": state.environment.model_dump(mode="json"),
        **(extra or {}),
    }
    case_open(run_id=ctx.run_id, case=case, detail=detail, pending=payload["pending"],
              receipt=payload["receipt"], environment=payload["environment"],
              observed=(extra or {}).get("observed"))
    _commit(ctx, ("review.opened", payload))
    log.warning("run %s frozen for review: %s (%s)", ctx.run_id, reason.value, detail)


def _stop(ctx: _Ctx, event: Event, reason: StopReason, detail: str, event_type: str,
          payload: dict[str, Any] | None = None) -> None:
    ctx.state.phase = transition(ctx.state.phase, event)
    ctx.state.stop_reason = reason
    ctx.state.stop_detail = detail[:4000]
    _commit(ctx, (event_type, {"reason": reason.value, "detail": detail, **(payload or {})}))


# --- recovery ---------------------------------------------------------------------------------


def _same_state(obs: Observation, ref: EnvironmentRef) -> bool:
    return obs.version == ref.version and obs.state_fingerprint == ref.state_fingerprint


def _recover_environment(ctx: _Ctx) -> None:
    """Re-observe and accept only the checkpointed state or the single pending write's post-state.

    DESIGN.md section 5: same version with different content, the same content on another
    instance, and multi-step drift all fail closed (freeze for review).
    """
    state = ctx.state
    if state.phase in TERMINAL_PHASES or state.phase == Phase.NEEDS_REVIEW:
        return
    obs = ctx.adapter.observe()
    ref = state.environment
    if obs.instance_id != ref.instance_id:
        _freeze(ctx, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                f"environment instance changed: checkpoint has {ref.instance_id}, observed {obs.instance_id}",
                extra={"observed": _obs_json(obs)})
        return
    if _same_state(obs, ref):
        return
    pending = state.pending
    if pending is not None and obs.state_fingerprint == pending.expected_post_fingerprint:
        return  # the single pending write landed; execution will reconcile its receipt
    if (pending is not None and state.phase == Phase.PENDING
            and ctx.adapter.lookup_receipt(pending.idempotency_key) is not None):
        # The adapter holds a receipt under the pending key: execution settles it first, so a
        # same-key/different-intent write freezes as receipt_conflict with the full receipt kept
        # (DESIGN.md section 6) instead of as anonymous drift; any other drift still freezes there.
        return
    if obs.version == ref.version:
        detail = (f"environment content changed at the same version {ref.version}: "
                  f"fingerprint {ref.state_fingerprint} -> {obs.state_fingerprint}")
    else:
        detail = (f"environment moved from {ref.version} to {obs.version} in a way no single pending "
                  "write explains")
    _freeze(ctx, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT, detail, extra={"observed": _obs_json(obs)})


def _obs_json(obs: Observation) -> dict[str, str]:
    return {"instance_id": obs.instance_id, "version": obs.version, "state_fingerprint": obs.state_fingerprint}


# --- one step ---------------------------------------------------------------------------------


def _step(ctx: _Ctx) -> None:
    ctx.lease = lease_renew(lease=ctx.lease, ttl_seconds=ctx.ttl)
    phase = ctx.state.phase
    try:
        if _cancel_requested(ctx):
            _cancel(ctx)
        elif phase == Phase.RUNNING:
            _propose(ctx)
        elif phase == Phase.PENDING:
            _execute_pending(ctx)
        else:  # pragma: no cover - the loop only calls _step in running/pending
            raise EngineError(f"cannot step a run in phase {phase}", run_id=ctx.run_id)
    except AdapterError as exc:
        if exc.retryable:
            raise  # busy or unavailable: the same step can succeed later (Celery retries)
        # The adapter refused for a reason a retry cannot fix (invalid action for this state, a
        # corrupt receipt store, an indeterminate write): fail closed, a human decides.
        _freeze(ctx, Event.ADAPTER_REFUSED, StopReason.ADAPTER_REFUSED, f"{type(exc).__name__}: {exc}")


def _cancel_requested(ctx: _Ctx) -> bool:
    return Run.objects.filter(run_id=ctx.run_id, cancel_requested=True).exists()


def _cancel(ctx: _Ctx) -> None:
    """Operator cancel: settle a pending write first (query by key), then stop without new effects."""
    state = ctx.state
    if state.phase == Phase.NEEDS_REVIEW:
        # The pending write, the receipt and the open case are the evidence: keep all of them.
        _stop(ctx, Event.CANCEL, StopReason.CANCELLED, "cancelled by an operator while frozen for review",
              "run.cancelled", {"kept_pending": state.pending is not None})
        return
    if state.pending is not None:
        receipt = ctx.adapter.lookup_receipt(state.pending.idempotency_key)
        if receipt is not None:
            _settle_receipt(ctx, receipt, reconciled=True)
            if state.phase != Phase.RUNNING:
                return
        else:
            # The adapter has no receipt for the key, so the write never happened: drop it.
            dropped = state.pending.model_dump(mode="json")
            state.pending = None
            _stop(ctx, Event.CANCEL, StopReason.CANCELLED, "cancelled by an operator before the write ran",
                  "run.cancelled", {"dropped_pending": dropped})
            return
    _stop(ctx, Event.CANCEL, StopReason.CANCELLED, "cancelled by an operator", "run.cancelled")


def _budget_exhausted(state: RunState) -> str | None:
    u, lim = state.usage, state.limits
    if u.proposals >= lim.proposals:
        return f"proposal budget of {lim.proposals} used"
    if u.steps >= lim.steps:
        return f"step budget of {lim.steps} used"
    if u.wall_seconds >= lim.wall_seconds:
        return f"wall-time budget of {lim.wall_seconds} s used"
    return None


def _put_blob(data: bytes) -> str:
    return attachment_put(data=data)


def _propose(ctx: _Ctx) -> None:
    state = ctx.state
    obs = ctx.adapter.observe()
    if obs.instance_id != state.environment.instance_id or not _same_state(obs, state.environment):
        _freeze(ctx, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                "environment changed outside the run since the last checkpoint", extra={"observed": _obs_json(obs)})
        return
    crash_point(CP_BEFORE_PROPOSE)
    proposal = ctx.planner.propose(cursor=state.cursor, planner_state=state.planner_state,
                                   observation=obs, put_blob=_put_blob)
    if isinstance(proposal, Done):
        _complete(ctx, obs, proposal)
        return
    exhausted = _budget_exhausted(state)
    if exhausted:
        _stop(ctx, Event.BUDGET_EXHAUSTED, StopReason.BUDGET_EXHAUSTED, exhausted, "run.budget_exhausted")
        return
    state.usage.proposals += 1
    action = proposal
    try:
        policy_check(state.scope, action)
    except PolicyViolationError as exc:
        _stop(ctx, Event.POLICY_VIOLATION, StopReason.POLICY_VIOLATION, exc.message, "run.policy_violation",
              {"action": action.model_dump(mode="json")})
        return
    key = derive_key(run_id=ctx.run_id, cursor=state.cursor, replan_epoch=state.replan_epoch)
    if key in state.quarantined_keys:
        raise EngineError("derived key is quarantined; the replan epoch did not advance", run_id=ctx.run_id,
                          idempotency_key=key)
    intent = action.intent_digest()
    expected_post = ctx.adapter.predict_post_state(action, blobs=_blob_source)
    approval = needs_approval(state.scope, action)
    state.pending = PendingAction(
        action=action,
        intent_digest=intent,
        idempotency_key=key,
        cursor=state.cursor,
        replan_epoch=state.replan_epoch,
        pre_state=state.environment.model_copy(deep=True),
        expected_post_fingerprint=expected_post,
        requires_approval=approval,
        proposed_at=_now(),
    )
    payload: dict[str, Any] = {"idempotency_key": key, "intent_digest": intent, "cursor": state.cursor,
                               "action": action.model_dump(mode="json"), "requires_approval": approval,
                               "expected_post_fingerprint": expected_post}
    if approval:
        diff = ctx.adapter.dry_run_diff(action, blobs=_blob_source)
        payload["dry_run_diff"] = attachment_put(data=diff.encode(), content_type="text/x-diff")
        state.phase = transition(state.phase, Event.APPROVAL_REQUIRED)
        state.stop_reason = StopReason.APPROVAL_REQUIRED
        state.stop_detail = "waiting for a human approval"
        _commit(ctx, ("intent.proposed", payload), ("approval.requested", {"idempotency_key": key}))
        return
    state.phase = transition(state.phase, Event.PROPOSE_WRITE)
    _commit(ctx, ("intent.proposed", payload))
    crash_point(CP_AFTER_INTENT)


def _blob_source(digest: str) -> bytes:
    return attachment_get(digest=digest)


def _execute_pending(ctx: _Ctx) -> None:
    """Execute the pending write once, or reconcile the receipt the adapter already holds."""
    state = ctx.state
    pending = state.pending
    if pending is None:  # invariant says otherwise; fail closed rather than trust it
        raise EngineError("phase pending without a pending action", run_id=ctx.run_id)
    key = pending.idempotency_key
    # Always query the adapter's authoritative store first: a crash may have hidden a success.
    lease_check(lease=ctx.lease)
    receipt = ctx.adapter.lookup_receipt(key)
    if receipt is not None:
        _settle_receipt(ctx, receipt, reconciled=True)
        return
    if pending.requires_approval:
        problem = approval_problem(pending=pending, state=state, observation=ctx.adapter.observe())
        if problem is not None:
            expired = pending.approval is not None and problem == "expired"
            state.phase = transition(state.phase, Event.APPROVAL_EXPIRED if expired else Event.APPROVAL_REQUIRED)
            state.stop_reason = StopReason.APPROVAL_EXPIRED if expired else StopReason.APPROVAL_REQUIRED
            state.stop_detail = f"approval not usable: {problem}"
            _commit(ctx, ("approval.expired" if expired else "approval.requested",
                          {"idempotency_key": key, "problem": problem}))
            return
    cached = receipt_cache_get(idempotency_key=key)
    if cached is not None:
        _freeze(ctx, Event.RECEIPT_DRIFT, StopReason.RECEIPT_MISSING,
                "the runtime cache holds a receipt the adapter no longer has; refusing to claim a replay",
                receipt=cached)
        return
    obs = ctx.adapter.observe()
    if obs.instance_id != pending.pre_state.instance_id or not _same_state(obs, pending.pre_state):
        if obs.state_fingerprint == pending.expected_post_fingerprint:
            detail = "the pending write's effect is visible but the adapter has no receipt for its key"
            _freeze(ctx, Event.RECEIPT_DRIFT, StopReason.RECEIPT_MISSING, detail, extra={"observed": _obs_json(obs)})
        else:
            _freeze(ctx, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                    "environment differs from the pending write's pre-state", extra={"observed": _obs_json(obs)})
        return
    lease_check(lease=ctx.lease)
    crash_point(CP_BEFORE_EXECUTE)
    try:
        receipt = ctx.adapter.execute(
            pending.action,
            idempotency_key=key,
            intent_digest=pending.intent_digest,
            fencing_token=ctx.lease.lease_version,
            blobs=_blob_source,
            approval_digest=_approval_digest(pending),
        )
    except AdapterTimeoutError as exc:
        _outcome_unknown(ctx, exc)
        return
    crash_point(CP_AFTER_EXECUTE)
    _settle_receipt(ctx, receipt, reconciled=False)


def _approval_digest(pending: PendingAction) -> str | None:
    return approval_digest(pending.approval) if pending.approval is not None else None


def _outcome_unknown(ctx: _Ctx, exc: Exception) -> None:
    """Timeout: the write may or may not have happened. Record it; the next step queries first."""
    pending = ctx.state.pending
    if pending is None:
        raise EngineError("timeout without a pending action", run_id=ctx.run_id)
    pending.attempts += 1
    payload = {"idempotency_key": pending.idempotency_key, "attempts": pending.attempts, "error": str(exc)[:500]}
    if pending.attempts >= MAX_UNKNOWN_OUTCOME_ATTEMPTS:
        receipt = ctx.adapter.lookup_receipt(pending.idempotency_key)
        if receipt is not None:
            _settle_receipt(ctx, receipt, reconciled=True)
            return
        _freeze(ctx, Event.OUTCOME_UNKNOWN, StopReason.OUTCOME_UNKNOWN,
                f"write timed out {pending.attempts} times and no receipt exists for its key", extra=payload)
        return
    _commit(ctx, ("write.outcome_unknown", payload))


def _settle_receipt(ctx: _Ctx, receipt: Receipt, *, reconciled: bool) -> None:
    """Check a receipt against the pending intent and the cache, then record it and advance."""
    state = ctx.state
    pending = state.pending
    if pending is None:
        raise EngineError("a receipt arrived without a pending action", run_id=ctx.run_id)
    if receipt.idempotency_key != pending.idempotency_key or receipt.intent_digest != pending.intent_digest:
        _freeze(ctx, Event.RECEIPT_CONFLICT, StopReason.RECEIPT_CONFLICT,
                f"the adapter holds a receipt for key {pending.idempotency_key} with intent "
                f"{receipt.intent_digest}, not {pending.intent_digest}", receipt=receipt)
        return
    untrusted = receipt_trust_problem(pending=pending, receipt=receipt)
    if untrusted is not None:
        _freeze(ctx, Event.RECEIPT_DRIFT, StopReason.UNTRUSTED_RECEIPT, untrusted, receipt=receipt)
        return
    cached = receipt_cache_get(idempotency_key=pending.idempotency_key)
    if cached is not None:
        comparison = compare_receipts(cached, receipt)
        if not comparison.same:
            _freeze(ctx, Event.RECEIPT_DRIFT, StopReason.RECEIPT_DRIFT,
                    "cached and authoritative receipts differ in: " + ", ".join(comparison.drifted_fields),
                    receipt=receipt, extra={"cached_receipt": cached.model_dump(mode="json")})
            return
    obs = ctx.adapter.observe()
    if (obs.instance_id != pending.pre_state.instance_id
            or obs.version != receipt.environment_version_after
            or obs.state_fingerprint != pending.expected_post_fingerprint):
        _freeze(ctx, Event.ENVIRONMENT_DRIFT, StopReason.ENVIRONMENT_DRIFT,
                "after the write the environment is not the single post-state the write produces",
                receipt=receipt, extra={"observed": _obs_json(obs)})
        return
    if cached is None:
        receipt_cache_put(run_id=ctx.run_id, receipt=receipt)
    crash_point(CP_AFTER_CACHE)
    fingerprint = receipt.fingerprint()
    state.executed.append(ExecutedWrite(
        idempotency_key=pending.idempotency_key, intent_digest=pending.intent_digest, cursor=pending.cursor,
        receipt=receipt, receipt_fingerprint=fingerprint,
        result_summary=f"{pending.action.kind} {pending.action.target}".strip()[:2000], reconciled=reconciled,
    ))
    if pending.approval is not None and pending.approval.nonce not in state.consumed_nonces:
        state.consumed_nonces.append(pending.approval.nonce)
    state.pending = None
    state.cursor += 1
    state.usage.steps += 1
    state.environment = store_observation(obs, observation_version=state.environment.observation_version + 1,
                                           adapter_generation=ctx.lease.lease_version)
    state.phase = transition(state.phase, Event.RECONCILED if reconciled else Event.EXECUTED)
    state.stop_reason = None
    state.stop_detail = ""
    _commit(ctx, ("write.reconciled" if reconciled else "write.executed", {
        "idempotency_key": pending.idempotency_key, "intent_digest": pending.intent_digest,
        "receipt": receipt.model_dump(mode="json"), "receipt_fingerprint": fingerprint,
        "environment_version": obs.version,
    }))
    crash_point(CP_AFTER_STEP)


def _complete(ctx: _Ctx, obs: Observation, done: Done) -> None:
    state = ctx.state
    crash_point(CP_BEFORE_VERIFY)
    outcome = verify(ctx.spec, obs, ctx.target, planner_state=state.planner_state, base_dir=ctx.base_dir)
    state.verifier_results.append(VerifierResult(
        environment_version=obs.version, environment_fingerprint=obs.state_fingerprint,
        passed=outcome.passed, detail=outcome.detail[:4000], at=_now(),
    ))
    audit = _audit_effects(ctx)
    event_payload = {"passed": outcome.passed, "detail": outcome.detail, "environment_version": obs.version,
                     "environment_fingerprint": obs.state_fingerprint, "planner": done.reason}
    if outcome.passed:
        state.phase = transition(state.phase, Event.VERIFIED)
        state.stop_reason = StopReason.VERIFIED
        state.stop_detail = outcome.detail[:4000]
        _commit(ctx, ("verifier.passed", event_payload), ("audit.effects", audit),
                ("run.completed", {"environment_version": obs.version}))
    else:
        state.phase = transition(state.phase, Event.VERIFIER_FAILED)
        state.stop_reason = StopReason.VERIFIER_FAILED
        state.stop_detail = outcome.detail[:4000]
        _commit(ctx, ("verifier.failed", event_payload), ("audit.effects", audit),
                ("run.failed", {"environment_version": obs.version}))


def _audit_effects(ctx: _Ctx) -> dict[str, Any]:
    """Count, from the adapter's own records, how many effects each of this run's keys has."""
    counts: dict[str, int] = {}
    for receipt in ctx.adapter.receipts():
        counts[receipt.idempotency_key] = counts.get(receipt.idempotency_key, 0) + 1
    keys = [w.idempotency_key for w in ctx.state.executed]
    duplicates = sum(max(0, counts.get(k, 0) - 1) for k in keys)
    missing = [k for k in keys if counts.get(k, 0) == 0]
    return {"keys": len(keys), "duplicates": duplicates, "missing": missing}


def iter_phases() -> Iterator[str]:
    """All phase names, for CLIs and filters."""
    return iter(p.value for p in Phase)


def run_request_cancel(*, run_id: str, requested_by: str) -> str:
    """Ask a run to stop; returns the run's phase afterwards.

    A live run (running, pending) is cancelled by the worker driving it, which first settles any
    pending write by querying the adapter with its key; the run is queued so a worker picks the
    request up. A frozen run (awaiting approval, needs review) has no worker, so it is cancelled
    here, under its lease, by the same settle-then-stop rule. Finished runs are left as they are.

    Raises:
        RunNotFoundError: unknown run.
        LeaseHeldError: a frozen run is being changed by someone else right now; try again.
    """
    from runtime.tasks import run_enqueue

    with transaction.atomic():
        current = Run.objects.select_for_update().filter(run_id=run_id).values_list("phase", flat=True).first()
        if current is None:
            raise RunNotFoundError(run_id=run_id)
        if current in {p.value for p in TERMINAL_PHASES}:
            return current  # finished runs have nothing to cancel; nothing is recorded
        Run.objects.filter(run_id=run_id).update(cancel_requested=True)
        trace_append(run_id=run_id, event_type="run.cancel_requested", payload={"requested_by": requested_by})
    phase = Run.objects.values_list("phase", flat=True).get(run_id=run_id)
    if phase in (Phase.AWAITING_APPROVAL.value, Phase.NEEDS_REVIEW.value):
        with run_session(run_id=run_id, worker=f"cancel:{requested_by}") as ctx:
            if ctx.state.phase in (Phase.AWAITING_APPROVAL, Phase.NEEDS_REVIEW):
                _cancel(ctx)
            return ctx.state.phase.value
    if phase in (Phase.RUNNING.value, Phase.PENDING.value):
        run_enqueue(run_id=run_id)
    return phase


def _reconcile_waiting(ctx: _Ctx) -> None:
    """A run waiting for approval whose write already committed (before a crash) only reconciles."""
    pending = ctx.state.pending
    if ctx.state.phase != Phase.AWAITING_APPROVAL or pending is None:
        return
    receipt = ctx.adapter.lookup_receipt(pending.idempotency_key)
    if receipt is not None:
        _settle_receipt(ctx, receipt, reconciled=True)


# --- sessions for the approval and review services ---------------------------------------------


def adapter_for_run(run: Run) -> Adapter:
    """Open the adapter a run acts on (from the spec stored with the run); read-only use is safe
    without the lease, writes need one."""
    stored = run.spec or {}
    spec = TaskSpec.from_json(stored["task"])
    return open_adapter(spec.environment.adapter, Path(stored["target"]))


@contextmanager
def run_session(*, run_id: str, worker: str, ttl_seconds: float | None = None,
                wait_seconds: float = 5.0) -> Iterator[_Ctx]:
    """Hold the run's lease, restore its latest checkpoint, yield the session, release the lease.

    Used by approval and review services to change a frozen run under the same fencing rules as
    the engine (every commit is fenced by this lease).

    Raises:
        LeaseHeldError: another worker still holds the lease after ``wait_seconds`` seconds.
        CheckpointError subclasses: restore failed closed.
    """
    from django.conf import settings

    ttl = ttl_seconds or settings.RATCHET_LEASE_SECONDS
    lease = _acquire_waiting(run_id=run_id, worker=worker, ttl=ttl, wait_seconds=wait_seconds)
    try:
        ctx = _load(run_id=run_id, worker=worker, lease=lease, ttl=ttl)
    except BaseException:
        lease_release(lease=lease)
        raise
    try:
        yield ctx
    finally:
        _release(ctx.lease, run_id)


def session_commit(ctx: _Ctx, *events: tuple[str, dict[str, Any]]) -> None:
    """Commit the session's state as the next checkpoint with ``events`` in the trace."""
    _commit(ctx, *events)


def session_settle(ctx: _Ctx, receipt: Receipt) -> None:
    """Reconcile a receipt the adapter already holds for the session's pending write."""
    _settle_receipt(ctx, receipt, reconciled=True)
