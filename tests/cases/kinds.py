"""One real frozen run per case kind, driven by the engine (never a hand-written case row).

Each helper writes a small task under ``directory`` (a scripted workspace task; a git replay for
``outcome_unknown``, the one adapter whose call can time out), drives it with ``run_advance``
into ``needs_review`` for its reason -- changing the environment or a stored row only where that
is how such a case arises -- and returns the open case. Tests using them need
``pytest.mark.django_db(transaction=True)`` and the ``ratchet_keys`` fixture; the ``planner_failed``
and ``code_changed`` helpers also need the example agent package
(``tests.plugins.support.require_example_package``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.receipts import receipt_cache_put
from runtime.core.checkpoint import Action, PendingAction, Receipt
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.engine.execute import MAX_UNKNOWN_OUTCOME_ATTEMPTS
from runtime.errors import BadSignatureError, CodeDigestMismatchError, LedgerChainError
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.models import Checkpoint, IdempotencyRecord, LedgerEntry, ReviewCase, Run
from runtime.regression.sources import hanging_git, small_history_build
from tests.engine.support import write_replay_task
from tests.factories import write_scripted_task
from tests.plugins.support import notes_task
from tests.verifiers.support import write_command_task

WORKER = "kinds-worker"

PLANNED = "max_orders = 5\n"
"""What the run plans to write to ``limits.toml``."""

ROGUE = "max_orders = 500\n"
"""What another caller wrote under the run's key."""


def _frozen(run_id: str, reason: str) -> ReviewCase:
    report = run_advance(run_id=run_id, worker=WORKER)
    if (report.phase, report.stop_reason) != ("needs_review", reason):
        raise AssertionError(f"expected needs_review/{reason}, got {report}")
    return ReviewCase.objects.get(run_id=run_id, status="open")


def _pending(directory: Path, **options: object) -> tuple[str, PendingAction]:
    """A run of one planned write to ``limits.toml`` stopped with that write pending."""
    spec = write_scripted_task(directory, steps=[{"target": "limits.toml", "content": PLANNED}], **options)
    run_id = run_start(spec_path=spec, worker=WORKER)
    run_advance(run_id=run_id, worker=WORKER, max_steps=1)
    pending = checkpoint_verify(run_id=run_id).state.pending
    if pending is None:
        raise AssertionError(f"run {run_id} has no pending write after one step")
    return run_id, pending


def _write_outside(directory: Path, run_id: str, action: Action, pending: PendingAction, *,
                   intent_digest: str | None = None) -> Receipt:
    """``action`` written by another caller of the workspace adapter under the pending key."""
    return open_adapter("workspace", directory / "ws").execute(
        action, idempotency_key=pending.idempotency_key, intent_digest=intent_digest or action.intent_digest(),
        fencing_token=Run.objects.get(run_id=run_id).lease_version, blobs=lambda d: attachment_get(digest=d))


def receipt_conflict(directory: Path) -> ReviewCase:
    """Another caller wrote other content under the run's pending key (``receipt_conflict``)."""
    run_id, pending = _pending(directory)
    rogue = Action(kind="write_file", target=pending.action.target,
                   params={"content": attachment_put(data=ROGUE.encode()), "executable": False})
    _write_outside(directory, run_id, rogue, pending)
    return _frozen(run_id, "receipt_conflict")


def untrusted_receipt(directory: Path) -> ReviewCase:
    """An approval-gated write committed by a caller that bound no approval to it (``untrusted_receipt``)."""
    spec = write_scripted_task(directory, steps=[{"target": "limits.toml", "content": PLANNED, "risk": "high"}],
                               approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker=WORKER)
    report = run_advance(run_id=run_id, worker=WORKER)
    if report.phase != "awaiting_approval":
        raise AssertionError(f"expected awaiting_approval, got {report}")
    [waiting] = approvals_waiting(run_ids=[run_id])
    approval_grant(run_id=run_id, approver="olivia", environment_fingerprint=waiting.environment_fingerprint)
    pending = checkpoint_verify(run_id=run_id).state.pending
    _write_outside(directory, run_id, pending.action, pending, intent_digest=pending.intent_digest)
    return _frozen(run_id, "untrusted_receipt")


def receipt_drift(directory: Path) -> ReviewCase:
    """The runtime's cached receipt for the pending key edited in the database so it no longer
    matches the adapter's (``receipt_drift``)."""
    run_id, pending = _pending(directory)
    receipt = _write_outside(directory, run_id, pending.action, pending, intent_digest=pending.intent_digest)
    receipt_cache_put(run_id=run_id, receipt=receipt)
    row = IdempotencyRecord.objects.get(idempotency_key=pending.idempotency_key)
    row.receipt = {**row.receipt, "receipt_id": "edited-in-the-database"}
    row.save(update_fields=["receipt"])
    return _frozen(run_id, "receipt_drift")


def receipt_missing(directory: Path) -> ReviewCase:
    """The pending write's content put in place by hand, with no receipt for its key (``receipt_missing``)."""
    run_id, pending = _pending(directory)
    (directory / "ws" / pending.action.target).write_text(PLANNED)
    return _frozen(run_id, "receipt_missing")


def outcome_unknown(directory: Path) -> ReviewCase:
    """Every git commit of the pending write hangs past the adapter's timeout (``outcome_unknown``)."""
    source = directory / "source"
    small_history_build(source)
    run_id = run_start(spec_path=write_replay_task(directory / "replay", source), worker=WORKER)
    if run_advance(run_id=run_id, worker=WORKER, max_steps=1).phase != "pending":
        raise AssertionError(f"run {run_id} has no pending write after one step")
    with hanging_git(directory / "bin", limit=MAX_UNKNOWN_OUTCOME_ATTEMPTS, after_update=False,
                     timeout_seconds=1.5):
        return _frozen(run_id, "outcome_unknown")


def adapter_refused(directory: Path) -> ReviewCase:
    """The workspace adapter refuses to delete a file that is not there (``adapter_refused``)."""
    spec = write_scripted_task(directory, steps=[{"target": "never-existed.txt", "delete": True}])
    return _frozen(run_start(spec_path=spec, worker=WORKER), "adapter_refused")


def environment_drift(directory: Path) -> ReviewCase:
    """A file of the workspace edited by hand while a write was pending (``environment_drift``)."""
    spec = write_scripted_task(directory, steps=[{"target": "a.txt", "content": "A\n"},
                                                 {"target": "b.txt", "content": "B\n"}])
    run_id = run_start(spec_path=spec, worker=WORKER)
    run_advance(run_id=run_id, worker=WORKER, max_steps=1)
    (directory / "ws" / "edited-by-hand.txt").write_text("edited by hand\n")
    return _frozen(run_id, "environment_drift")


def verifier_error(directory: Path) -> ReviewCase:
    """A command verifier whose program is not installed gives no verdict (``verifier_error``)."""
    spec = write_command_task(directory, argv=["ratchet-no-such-test-runner"])
    return _frozen(run_start(spec_path=spec, worker=WORKER), "verifier_error")


def ledger_corrupt(directory: Path) -> ReviewCase:
    """A receipts-ledger row of a finished run edited in the database, found by the full
    verification ``checkpoint verify`` runs (``ledger_corrupt``)."""
    spec = write_scripted_task(directory, steps=[{"target": "a.txt", "content": "A\n"},
                                                 {"target": "b.txt", "content": "B\n"}])
    run_id = run_start(spec_path=spec, worker=WORKER)
    run_advance(run_id=run_id, worker=WORKER)
    LedgerEntry.objects.filter(run_id=run_id, seq=1).update(key="edited-in-the-database")
    with pytest.raises(LedgerChainError):
        checkpoint_verify(run_id=run_id)
    return ReviewCase.objects.get(run_id=run_id, status="open", reason="ledger_corrupt")


def restore_refused(directory: Path) -> ReviewCase:
    """The run's newest checkpoint envelope edited in the database, so its MAC no longer verifies
    and the next restore fails closed (``restore_refused``)."""
    run_id, _pending_write = _pending(directory)
    row = Checkpoint.objects.filter(run_id=run_id).order_by("-generation").first()
    raw = bytearray(bytes(row.envelope))
    raw[len(raw) // 2] ^= 0x01
    Checkpoint.objects.filter(pk=row.pk).update(envelope=bytes(raw))
    with pytest.raises(BadSignatureError):
        run_advance(run_id=run_id, worker=WORKER)
    return ReviewCase.objects.get(run_id=run_id, status="open", reason="restore_refused")


CHANGED_PLANNER = '''from ratchet_example_agent.planner import NoteTaker


class Planner(NoteTaker):
    def propose(self, **kwargs):
        return NoteTaker.propose(self, **kwargs)  # edited after the run was pinned
'''


def code_changed(directory: Path) -> ReviewCase:
    """The run's planner module edited on disk between two steps, so the resume meets other code
    than the run is pinned to (``code_changed``)."""
    code = directory / "code"
    code.mkdir()
    module = f"kinds_planner_{abs(hash(str(directory)))}"
    (code / f"{module}.py").write_text("from ratchet_example_agent.planner import NoteTaker as Planner\n")
    sys.path.insert(0, str(code))
    try:
        spec = notes_task(directory, notes=3, planner=f'kind = "python"\nentry = "{module}:Planner"')
        run_id = run_start(spec_path=spec, worker=WORKER)
        run_advance(run_id=run_id, worker=WORKER, max_steps=1)
        (code / f"{module}.py").write_text(CHANGED_PLANNER)
        with pytest.raises(CodeDigestMismatchError):
            run_advance(run_id=run_id, worker=WORKER)
    finally:
        sys.path.remove(str(code))
        sys.modules.pop(module, None)
    return ReviewCase.objects.get(run_id=run_id, status="open", reason="code_changed")


def planner_failed(directory: Path) -> ReviewCase:
    """A planner plug-in that raises while proposing (``planner_failed``)."""
    spec = notes_task(directory, planner='kind = "python"\nentry = "tests.plugins.fakes:RaisesWhileProposing"',
                      planner_options="notes = 3", verifier='kind = "always"')
    return _frozen(run_start(spec_path=spec, worker=WORKER), "planner_failed")


KINDS: dict[str, Callable[[Path], ReviewCase]] = {
    "receipt_conflict": receipt_conflict,
    "untrusted_receipt": untrusted_receipt,
    "receipt_drift": receipt_drift,
    "receipt_missing": receipt_missing,
    "outcome_unknown": outcome_unknown,
    "adapter_refused": adapter_refused,
    "environment_drift": environment_drift,
    "planner_failed": planner_failed,
    "verifier_error": verifier_error,
    "ledger_corrupt": ledger_corrupt,
    "restore_refused": restore_refused,
    "code_changed": code_changed,
}
"""Case kind -> the helper that opens one."""

NEEDS_EXAMPLE_AGENT = frozenset({"planner_failed", "code_changed"})
"""Kinds whose helper runs the example agent's planner (skip them where it is not installed)."""
