"""Second chances: resume a run stopped for an infrastructure reason, run a failed or cancelled run
again (DESIGN.md section 6.12).

*Resume.* A run whose newest trace event says a process could not drive it for a reason outside
the run -- ``run.blocked`` (a worker without the run's plug-in, ``runtime.engine.blocked``),
``restore.refused`` or ``recovery.failed`` (its checkpoint, key or store could not be read) --
is left alone by the sweeper until a person asks. :func:`run_resume_request` first checks the
cause is gone *from here* (the run's spec and plug-ins load, its adapter opens and observes the
environment, its checkpoint verifies), then traces ``run.resume_requested`` (who, which cause)
and queues the run. It changes nothing a worker would not redo: no signature is needed.

*Run again.* :func:`run_again` starts a new run from the stored spec of a failed or cancelled
run -- the same task, policy, planner and environment -- as a fresh run with its own signed
first checkpoint, records the link on the new run's row (``Run.again_of``) and traces it on
both runs (``run.again_started`` on the new one, ``run.run_again`` on the old one), then queues
the new run. Both services leave checking the caller's permission to their callers (the
dashboard view, the command line).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

import runtime.workers.dispatch
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.refusal_freeze import RESTORE_REFUSED
from runtime.checkpoints.session import adapter_for_run
from runtime.core.checkpoint import TERMINAL_PHASES, Phase
from runtime.engine import run_start
from runtime.engine.blocked import RUN_BLOCKED
from runtime.errors import RatchetError, RunAgainRefusedError, RunNotFoundError, RunResumeRefusedError
from runtime.evidence.trace import trace_append
from runtime.models import Run, TraceEvent
from runtime.planners.factory import build_planner
from runtime.taskspec import TaskSpec
from runtime.taskspec.writing import toml_dumps

INFRASTRUCTURE_EVENTS = (RUN_BLOCKED, RESTORE_REFUSED, "recovery.failed")
"""Newest trace events that say a run stopped for a reason outside it (DESIGN.md section 6.12)."""

AGAIN_PHASES = (Phase.FAILED.value, Phase.CANCELLED.value)
"""Phases of a run that may be run again."""


@dataclass(frozen=True)
class InfrastructureStop:
    """Why a run is stopped for an infrastructure reason: the trace ``event`` type, the ``error``
    class name, its ``message`` and what fixes it (``hint``, ``""`` when the event gave none)."""

    event: str
    error: str
    message: str
    hint: str


def run_infrastructure_stop(*, run_id: str) -> InfrastructureStop | None:
    """The infrastructure reason ``run_id`` is stopped for, read from its newest trace event; None
    for a run that is not so stopped (a terminal run never is)."""
    row = Run.objects.filter(run_id=run_id).values_list("phase", flat=True).first()
    if row is None or row in {p.value for p in TERMINAL_PHASES}:
        return None
    newest = TraceEvent.objects.filter(run_id=run_id).order_by("-seq").values_list("event_type", "payload").first()
    if newest is None or newest[0] not in INFRASTRUCTURE_EVENTS:
        return None
    payload: dict[str, Any] = newest[1] if isinstance(newest[1], dict) else {}
    return InfrastructureStop(event=newest[0], error=str(payload.get("error") or ""),
                              message=str(payload.get("message") or ""), hint=str(payload.get("hint") or ""))


def _cause_still_there(run: Run) -> str:
    """What still stops ``run`` here, or ``""``: its spec and plug-ins load, its adapter observes
    its environment and its checkpoint verifies."""
    try:
        spec = TaskSpec.from_json((run.spec or {}).get("task") or {})
        build_planner(spec, base_dir=Path((run.spec or {}).get("base_dir") or "."))
        adapter_for_run(run).observe()
        checkpoint_verify(run_id=run.run_id)
    except (RatchetError, DatabaseError, OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def run_resume_request(*, run_id: str, requested_by: str) -> InfrastructureStop:
    """Queue a run stopped for an infrastructure reason once the cause is gone (DESIGN.md section 6.12).

    Args:
        run_id: the run.
        requested_by: the operator (traced).

    Returns:
        The :class:`InfrastructureStop` that was lifted.

    Raises:
        RunNotFoundError: unknown run.
        RunResumeRefusedError: the run is not stopped for an infrastructure reason, or the cause
            is still there (the message names it); nothing was queued or traced.
    """
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    stop = run_infrastructure_stop(run_id=run_id)
    if stop is None:
        raise RunResumeRefusedError(f"run {run_id} is not stopped for an infrastructure reason (phase {run.phase})",
                                    run_id=run_id, phase=run.phase)
    still = _cause_still_there(run)
    if still:
        raise RunResumeRefusedError(f"the cause is still there for run {run_id}: {still}", run_id=run_id,
                                    cause=stop.event)
    with transaction.atomic():
        trace_append(run_id=run_id, event_type="run.resume_requested",
                     payload={"requested_by": requested_by, "cause": stop.event, "error": stop.error})
        runtime.workers.dispatch.run_enqueue(run_id=run_id)
    return stop


def _spec_file(stored: dict[str, Any]) -> Path:
    """The stored task spec written as TOML in a directory of its own under ``VAR_DIR``."""
    task = dict(stored.get("task") or {})
    environment = dict(task.get("environment") or {})
    if environment.get("setup", "none") != "none" and stored.get("target"):
        # A prepared environment got ``<target>/<run id>``; the new run gets its own beside it.
        environment["target"] = str(Path(stored["target"]).parent)
    task["environment"] = environment
    directory = Path(tempfile.mkdtemp(prefix="again-", dir=_again_dir()))
    path = directory / "task.toml"
    path.write_text(toml_dumps(_without_none(task)), encoding="utf-8")
    return path


def _again_dir() -> Path:
    directory = Path(settings.VAR_DIR) / "run-again"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value if v is not None]
    return value


def run_again(*, run_id: str, requested_by: str) -> str:
    """Start a new run with the stored spec of a failed or cancelled run; returns the new run id
    (DESIGN.md section 6.12).

    Args:
        run_id: a run in ``failed`` or ``cancelled``.
        requested_by: the operator (traced on both runs).

    Raises:
        RunNotFoundError: unknown run.
        RunAgainRefusedError: the run did not end failed or cancelled, or its stored spec holds
            no task; nothing was created.
        TaskSpecError / AdmissionClosedError / PluginError / AdapterError: from ``run_start``,
            as for any new run; nothing was created.
    """
    run = Run.objects.filter(run_id=run_id).first()
    if run is None:
        raise RunNotFoundError(run_id=run_id)
    if run.phase not in AGAIN_PHASES:
        raise RunAgainRefusedError(f"run {run_id} is {run.phase}, not failed or cancelled", run_id=run_id,
                                   phase=run.phase)
    stored = run.spec or {}
    if not stored.get("task"):
        raise RunAgainRefusedError(f"run {run_id} has no stored task spec", run_id=run_id)
    new_id = run_start(spec_path=_spec_file(stored), tenant_id=run.tenant_id,
                       base_dir=stored.get("base_dir") or None)
    with transaction.atomic():
        Run.objects.filter(run_id=new_id).update(again_of=run_id)
        trace_append(run_id=new_id, event_type="run.again_started",
                     payload={"again_of": run_id, "requested_by": requested_by})
        trace_append(run_id=run_id, event_type="run.run_again",
                     payload={"new_run_id": new_id, "requested_by": requested_by})
        runtime.workers.dispatch.run_enqueue(run_id=new_id)
    return new_id


def runs_again_of(*, run_id: str) -> list[str]:
    """The runs started again from ``run_id``, oldest first."""
    return list(Run.objects.filter(again_of=run_id).order_by("created_at", "run_id").values_list("run_id", flat=True))
