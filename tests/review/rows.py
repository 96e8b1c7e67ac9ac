"""Build runtime rows straight through the ORM for dashboard tests.

The dashboard only reads, so tests write the rows it reads directly: a ``Run``, its high-water
mark, signed checkpoints (``seal`` with a test keyring) and a valid hash-chained trace (hashes
from ``runtime.evidence.trace.event_hash``), without running the engine.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime.checkpoints.ledger import ledger_rows_add
from runtime.core.checkpoint import (
    Action,
    ExecutedWrite,
    PendingAction,
    Phase,
    Receipt,
    Risk,
    RunIdentity,
    RunState,
)
from runtime.core.envelope import envelope_digest, seal
from runtime.core.ledger import state_ledger
from runtime.core.signing import Keyring
from runtime.evidence.trace import event_hash, genesis_hash
from runtime.models import Checkpoint, HighWaterMark, Run, TraceEvent
from tests.factories import make_state

BASE_TIME = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pending_state(state: RunState, *, attachments: list[str] | None = None) -> RunState:
    """``state`` moved to phase pending with one executed write and one high-risk pending write."""
    done = Action(kind="write_file", target="notes/done.txt", params={"content": "first"})
    receipt = Receipt(
        namespace="workspace",
        adapter_version="ws-1",
        receipt_id="rcpt-0001",
        idempotency_key="key-done-0001",
        intent_digest=done.intent_digest(),
        result={"bytes": 5},
        environment_version_after="v1",
        fencing_token=1,
    )
    state_ledger(state).record_executed(  # a receipts-ledger entry (DESIGN.md section 3.1)
        ExecutedWrite(
            idempotency_key="key-done-0001",
            intent_digest=done.intent_digest(),
            cursor=0,
            receipt=receipt,
            receipt_fingerprint=receipt.fingerprint(),
            result_summary="wrote notes/done.txt (5 bytes)",
        )
    )
    if attachments:
        state.environment = state.environment.model_copy(update={"attachments": attachments})
    action = Action(
        kind="write_file", target="notes/next.txt", params={"content": "second"}, risk=Risk.HIGH
    )
    state.pending = PendingAction(
        action=action,
        intent_digest=action.intent_digest(),
        idempotency_key="key-next-0002",
        cursor=1,
        replan_epoch=0,
        pre_state=state.environment,
        requires_approval=True,
        proposed_at=BASE_TIME,
    )
    state.phase = Phase.PENDING
    return state


def build_run(
    keyring: Keyring,
    *,
    run_id: str | None = None,
    phase: str = Phase.RUNNING.value,
    tenant: str = "tenant-1",
    task: str = "task-1",
    generations: int = 1,
    events: int = 3,
    event_type: str = "step.observed",
    environment_version: str = "v0",
    owner_worker: str = "",
    lease_seconds: float = 30.0,
    state: RunState | None = None,
    stop_reason: str = "",
) -> Run:
    """Create one run with ``generations`` signed checkpoints (the last committed) and ``events``
    chained trace events. ``phase``/``stop_reason`` go on the run row; the checkpoint payload is a
    valid running state unless ``state`` is given."""
    run_id = run_id or uuid.uuid4().hex
    if state is None:
        state = make_state(run_id=run_id, task_id=task)
    state.identity = RunIdentity(
        **{**state.identity.model_dump(), "tenant_id": tenant, "task_id": task}
    )
    ident = state.identity
    run = Run.objects.create(
        run_id=run_id,
        tenant_id=tenant,
        task_id=task,
        task_version=ident.task_version,
        policy_id=ident.policy_id,
        policy_version=ident.policy_version,
        environment_instance_id=state.environment.instance_id,
        scenario_fingerprint=ident.scenario_fingerprint,
        phase=phase,
        stop_reason=stop_reason,
        owner_worker=owner_worker,
        lease_version=1 if owner_worker else 0,
        lease_expires_at=(datetime.now(UTC) + timedelta(seconds=lease_seconds))
        if owner_worker
        else None,
        generation=generations,
    )
    # Entries staged in the state's receipts ledger are written as the commit would write them.
    entries, state.ledger = state_ledger(state).chain_staged()
    ledger_rows_add(run_id=run_id, entries=entries, generation=generations)
    committed = ""
    for generation in range(1, generations + 1):
        raw, envelope = seal(state, generation=generation, keyring=keyring, created_at=BASE_TIME)
        committed = envelope_digest(raw)
        Checkpoint.objects.create(
            run=run,
            generation=generation,
            envelope=raw,
            digest=committed,
            key_id=envelope.key_id,
            schema_version=envelope.schema_version,
            lease_version=1,
        )
    HighWaterMark.objects.create(
        task_id=task,
        run_id=run_id,
        environment_instance_id=state.environment.instance_id,
        generation=generations,
        checkpoint_digest=committed,
    )
    add_events(run, events, event_type=event_type, environment_version=environment_version)
    return run


def add_events(
    run: Run,
    count: int,
    *,
    event_type: str = "step.observed",
    environment_version: str = "v0",
    payload: dict[str, Any] | None = None,
) -> None:
    """Append ``count`` correctly chained trace events to ``run`` and move its trace head."""
    last = TraceEvent.objects.filter(run=run).order_by("-seq").first()
    seq, prev = (last.seq, last.hash) if last else (0, genesis_hash(run.run_id))
    rows = []
    for _ in range(count):
        seq += 1
        at = BASE_TIME + timedelta(seconds=seq)
        body = dict(payload or {"step": seq})
        h = event_hash(
            run_id=run.run_id,
            seq=seq,
            event_type=event_type,
            payload=body,
            environment_version=environment_version,
            created_at=at,
            prev_hash=prev,
        )
        rows.append(
            TraceEvent(
                run=run,
                seq=seq,
                event_type=event_type,
                payload=body,
                environment_version=environment_version,
                prev_hash=prev,
                hash=h,
                created_at=at,
            )
        )
        prev = h
    TraceEvent.objects.bulk_create(rows)
    Run.objects.filter(run_id=run.run_id).update(trace_seq=seq, trace_head=prev)


def build_waiting_run(keyring: Keyring, *, run_id: str, events: int = 3,
                      diff: bytes = b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n") -> Run:
    """A run in ``awaiting_approval`` before a high-risk write, with its ``intent.proposed``
    event naming a stored dry-run diff (as the engine records it)."""
    from runtime.core.checkpoint import StopReason
    from runtime.evidence.attachments import attachment_put

    state = pending_state(make_state(run_id=run_id))
    state.phase = Phase.AWAITING_APPROVAL
    state.stop_reason = StopReason.APPROVAL_REQUIRED
    state.stop_detail = "waiting for a human approval"
    run = build_run(keyring, run_id=run_id, phase=Phase.AWAITING_APPROVAL.value, state=state,
                    events=events, stop_reason="approval_required")
    add_events(run, 1, event_type="intent.proposed", payload={
        "idempotency_key": state.pending.idempotency_key,
        "intent_digest": state.pending.intent_digest,
        "dry_run_diff": attachment_put(data=diff, content_type="text/x-diff"),
    })
    return run


def build_case(run: Run, *, case_id: str, status: str = "aborted") -> Any:
    """A review case row for ``run`` about its pending write and a conflicting receipt."""
    from runtime.models import ReviewCase

    pending = {"idempotency_key": "key-next-0002", "intent_digest": "sha256:" + "1" * 64,
               "action": {"kind": "write_file", "target": "notes/next.txt"},
               "pre_state": {"adapter_kind": "workspace", "instance_id": "env-1", "version": "v1"}}
    receipt = {"namespace": "workspace:env-1", "adapter_version": "ws-1", "receipt_id": "r-9",
               "idempotency_key": "key-next-0002", "intent_digest": "sha256:" + "2" * 64,
               "result": {"bytes": 3}, "environment_version_after": "v2",
               "business_object": "notes/next.txt"}
    return ReviewCase.objects.create(
        case_id=case_id, run=run, status=status, reason="receipt_conflict",
        idempotency_key="key-next-0002", pending=pending, receipt=receipt,
        receipt_fingerprint="sha256:" + "3" * 64,
        environment={"instance_id": "env-1", "version": "v1",
                     "state_fingerprint": "sha256:" + "4" * 64},
        trace_excerpt=[{"seq": 1, "type": "intent.proposed", "payload": {},
                        "environment_version": "v1", "hash": "sha256:" + "5" * 64}],
        decided_by="reviewer" if status != "open" else "",
    )
