"""Real runs for the dashboard's action stories: driven by the engine, never written by hand.

Each helper starts a small scripted workspace run (``tests.factories.write_scripted_task``) and
drives it with ``run_advance`` to the state a story needs, so approving, denying, cancelling and
deciding go through the real services with real checkpoints, receipts and trace. Tests using
them need ``pytest.mark.django_db(transaction=True)`` (leases are judged by the database clock,
which a wrapping test transaction would freeze on PostgreSQL) and the ``ratchet_keys`` fixture.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Action
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.models import ReviewCase, Run, TraceEvent
from tests.factories import write_scripted_task

APPROVAL_STEPS = [
    {"target": "notes.txt", "content": "low-risk note\n"},
    {"target": "limits.toml", "content": "max_orders = 3\nmax_refunds = 1\n", "risk": "high"},
]
"""The second write is high risk: the run waits for an operator before it."""

CONFLICT_STEPS = [
    {"target": "a.txt", "content": "A\n"},
    {"target": "b.txt", "content": "B\n"},
]


def approval_run(directory: Path) -> str:
    """A run frozen in ``awaiting_approval`` before its high-risk write; returns the run id."""
    spec = write_scripted_task(directory, steps=APPROVAL_STEPS, approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker="story-worker")
    report = run_advance(run_id=run_id, worker="story-worker")
    assert report.phase == "awaiting_approval", report
    return run_id


def expired_approval_run(directory: Path) -> str:
    """A run whose one-second approval expired before its write ran (``approval_expired``)."""
    run_id = approval_run(directory)
    [waiting] = approvals_waiting(run_ids=[run_id])
    approval_grant(
        run_id=run_id,
        approver="earlier-operator",
        environment_fingerprint=waiting.environment_fingerprint,
        ttl_seconds=1,
    )
    time.sleep(1.1)
    report = run_advance(run_id=run_id, worker="story-worker")
    assert (report.phase, report.stop_reason) == ("awaiting_approval", "approval_expired"), report
    return run_id


@dataclass(frozen=True)
class Conflict:
    """A run frozen in ``needs_review`` on a receipt conflict, and its open case."""

    run_id: str
    case_id: str
    key: str
    workspace: Path


def conflict_run(directory: Path) -> Conflict:
    """Stop a run at its pending write, let another caller use the key for a different write,
    and let the engine freeze the run (``receipt_conflict``) with an open review case."""
    spec = write_scripted_task(directory, steps=CONFLICT_STEPS)
    run_id = run_start(spec_path=spec, worker="story-worker")
    assert run_advance(run_id=run_id, worker="story-worker", max_steps=1).phase == "pending"
    pending = checkpoint_verify(run_id=run_id).state.pending
    rogue = Action(
        kind="write_file",
        target=pending.action.target,
        params={"content": attachment_put(data=b"another caller's bytes\n"), "executable": False},
    )
    workspace = directory / "ws"
    open_adapter("workspace", workspace).execute(
        rogue,
        idempotency_key=pending.idempotency_key,
        intent_digest=rogue.intent_digest(),
        fencing_token=Run.objects.get(run_id=run_id).lease_version,
        blobs=lambda digest: attachment_get(digest=digest),
    )
    report = run_advance(run_id=run_id, worker="story-worker")
    assert (report.phase, report.stop_reason) == ("needs_review", "receipt_conflict"), report
    case = ReviewCase.objects.get(run_id=run_id, status="open")
    return Conflict(
        run_id=run_id, case_id=case.case_id, key=pending.idempotency_key, workspace=workspace
    )


def completed_run(directory: Path) -> str:
    """A two-write run driven to the end."""
    spec = write_scripted_task(directory, steps=CONFLICT_STEPS)
    run_id = run_start(spec_path=spec, worker="story-worker")
    assert run_advance(run_id=run_id, worker="story-worker").phase == "completed"
    return run_id


def phase(run_id: str) -> str:
    return Run.objects.get(run_id=run_id).phase


def generation(run_id: str) -> int:
    return Run.objects.get(run_id=run_id).generation


def events(run_id: str, event_type: str) -> list[dict]:
    """Payloads of the run's ``event_type`` events, oldest first."""
    return list(
        TraceEvent.objects.filter(run_id=run_id, event_type=event_type)
        .order_by("seq")
        .values_list("payload", flat=True)
    )


def hidden(html: str, name: str) -> str:
    """The value of the first hidden input called ``name`` on a page."""
    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    assert match, f"no hidden {name} field on the page"
    return match.group(1)


def messages(html: str) -> list[str]:
    """The flash messages shown on a page, as HTML."""
    return re.findall(r'<div class="alert [^"]*" role="[a-z]+"><p>(.*?)</p></div>', html, re.S)
