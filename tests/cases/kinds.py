"""One real frozen run per case kind, driven by the engine (never a hand-written case row).

Each helper writes a small scripted workspace task under ``directory``, drives it with
``run_advance`` into ``needs_review`` for its reason and returns the open case. Tests using them
need ``pytest.mark.django_db(transaction=True)`` and the ``ratchet_keys`` fixture; the planner
helper also needs the example agent package (``tests.plugins.support.require_example_package``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Action
from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.models import ReviewCase, Run
from tests.factories import write_scripted_task
from tests.plugins.support import notes_task

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


def receipt_conflict(directory: Path) -> ReviewCase:
    """Another caller wrote other content under the run's pending key (``receipt_conflict``)."""
    spec = write_scripted_task(directory, steps=[{"target": "limits.toml", "content": PLANNED}])
    run_id = run_start(spec_path=spec, worker=WORKER)
    run_advance(run_id=run_id, worker=WORKER, max_steps=1)
    pending = checkpoint_verify(run_id=run_id).state.pending
    rogue = Action(kind="write_file", target=pending.action.target,
                   params={"content": attachment_put(data=ROGUE.encode()), "executable": False})
    open_adapter("workspace", directory / "ws").execute(
        rogue, idempotency_key=pending.idempotency_key, intent_digest=rogue.intent_digest(),
        fencing_token=Run.objects.get(run_id=run_id).lease_version, blobs=lambda d: attachment_get(digest=d))
    return _frozen(run_id, "receipt_conflict")


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


def planner_failed(directory: Path) -> ReviewCase:
    """A planner plug-in that raises while proposing (``planner_failed``)."""
    spec = notes_task(directory, planner='kind = "python"\nentry = "tests.plugins.fakes:RaisesWhileProposing"',
                      planner_options="notes = 3", verifier='kind = "always"')
    return _frozen(run_start(spec_path=spec, worker=WORKER), "planner_failed")


KINDS: dict[str, Callable[[Path], ReviewCase]] = {
    "receipt_conflict": receipt_conflict,
    "adapter_refused": adapter_refused,
    "environment_drift": environment_drift,
    "planner_failed": planner_failed,
}
"""Case kind -> the helper that opens one."""
