"""Seeding the demo: drive one run per scenario into its state through the real services.

The replay scenarios (:mod:`runtime.demo.scenarios`) replay this repository's history; the
model-driven ones (:mod:`runtime.demo.agents`) are chat-tools runs against the demo's fake model,
one of them on the demo's orders service (:mod:`runtime.demo.services`, which must be started
first). Seeding is idempotent: the run ids go to ``<workdir>/seeded.json`` and a second call
returns them without starting new runs while those runs still exist.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from kombu.exceptions import OperationalError

import runtime.workers.dispatch
from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Action
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.demo.agents import AGENT_SCENARIOS, agent_task_write
from runtime.demo.crash import crashed_run_recover
from runtime.demo.scenarios import MIN_COMMITS, SCENARIOS, conflicting_commit, task_write
from runtime.demo.services import DemoServices
from runtime.engine import run_advance, run_start
from runtime.errors import DemoSetupError, RatchetError
from runtime.evidence.attachments import attachment_get
from runtime.models import Run
from runtime.planners.git_history.source import rev_parse_commit, run_git

log = logging.getLogger("runtime.demo")

MARKER = "seeded.json"
"""The file under the workdir that records the seeded run ids (scenario name -> run id)."""


DEMO_ORDER = ("completed", "running", "awaiting_approval", "approval_expired", "receipt_conflict",
              "receipt_conflict_2", "failed", "recovered", "agent_orders", "agent_ledger")
"""Every seeded run's scenario name, in the order the demo seeds and lists them."""


def demo_scenarios() -> list[tuple[str, str]]:
    """``(name, description)`` of every demo run, in :data:`DEMO_ORDER`."""
    described = {s.name: s.description for s in (*SCENARIOS, *AGENT_SCENARIOS)}
    return [(name, described[name]) for name in DEMO_ORDER]


@dataclass(frozen=True)
class DemoSeed:
    """What :func:`demo_seed` did: ``runs`` maps scenario name to run id; ``created`` is False
    when the runs of an earlier seeding were found and reused."""

    runs: dict[str, str]
    created: bool


def _revisions(source: Path) -> dict[int, str]:
    try:
        count = int(run_git(source, "rev-list", "--first-parent", "--count", "HEAD").strip())
    except (RatchetError, ValueError) as exc:
        raise DemoSetupError(f"cannot read the history of {source.name}: {exc}") from None
    if count < MIN_COMMITS:
        raise DemoSetupError(
            f"the demo replays up to {MIN_COMMITS - 1} commits back but the repository has "
            f"{count} first-parent commit(s)",
            source=source.name,
        )
    return {
        k: rev_parse_commit(source, f"HEAD~{k}")
        for k in {s.base for s in SCENARIOS} | {s.tip for s in SCENARIOS}
    }


def _existing(workdir: Path) -> dict[str, str] | None:
    try:
        runs = json.loads((workdir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(runs, dict) or set(runs) != set(DEMO_ORDER):
        return None
    if Run.objects.filter(run_id__in=list(runs.values())).count() != len(runs):
        return None  # the database was reset since: seed again
    return runs


def demo_seed(*, source: Path, workdir: Path, services: DemoServices, worker: str = "demo-seeder") -> DemoSeed:
    """Seed one run per scenario of :data:`DEMO_ORDER` (idempotent).

    Args:
        source: a git repository with at least :data:`MIN_COMMITS` first-parent commits (the
            demo uses this repository's root).
        workdir: where task specs, replay targets and the marker go (``var/demo``).
        services: the demo's fake model and orders service, started (their ports go into the
            model-driven tasks; the HTTP adapter's token must be in the environment).
        worker: the lease identity the seeding runs use.

    Returns:
        :class:`DemoSeed` with the run id of every scenario.

    Raises:
        DemoSetupError: ``source`` is not a repository with enough history, or a scenario did
            not reach its state (the message names it and the phase it reached instead).
        RatchetError subclasses from the runtime services (task spec, planner, adapter).
    """
    existing = _existing(workdir)
    if existing is not None:
        return DemoSeed(runs=existing, created=False)
    source = source.resolve()
    revs = _revisions(source)
    runs: dict[str, str] = {}
    for name in DEMO_ORDER:
        runs[name] = _seed_one(name, source=source, workdir=workdir, services=services, worker=worker, revs=revs)
        log.info("demo: seeded %s as run %s", name, runs[name])
    (workdir / MARKER).write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")
    return DemoSeed(runs=runs, created=True)


def demo_seed_scenario(*, name: str, source: Path, workdir: Path, services: DemoServices,
                       worker: str = "demo-seeder") -> str:
    """Seed the one scenario ``name`` (a name of :data:`DEMO_ORDER`) and return its run id;
    :func:`demo_seed` does this for every scenario. Not idempotent: each call starts a new run.

    Arguments and errors as :func:`demo_seed`; an unknown ``name`` raises DemoSetupError.
    """
    if name not in _SEEDERS:
        raise DemoSetupError(f"the demo has no scenario {name!r}; it has {', '.join(DEMO_ORDER)}")
    source = source.resolve()
    return _seed_one(name, source=source, workdir=workdir, services=services, worker=worker,
                     revs=_revisions(source))


def _seed_one(name: str, *, source: Path, workdir: Path, services: DemoServices, worker: str,
              revs: dict[int, str]) -> str:
    replays = {s.name: s for s in SCENARIOS}
    if name in replays:
        spec = task_write(scenario=replays[name], source=source, workdir=workdir, revs=revs)
    else:
        agents = {s.name: s for s in AGENT_SCENARIOS}
        spec = agent_task_write(scenario=agents[name], workdir=workdir, model_base_url=services.model_base_url,
                                orders_port=services.orders_port)
    return _SEEDERS[name](name, spec, worker)


def _expect(run_id: str, name: str, phase: str, stop_reason: str | None = None) -> None:
    row = Run.objects.filter(run_id=run_id).values("phase", "stop_reason").first()
    if row is None or row["phase"] != phase or (stop_reason and row["stop_reason"] != stop_reason):
        got = f"{row['phase']} ({row['stop_reason']})" if row else "missing"
        raise DemoSetupError(f"demo scenario {name} should be {phase} but is {got}", run_id=run_id)


def _seed_driven(name: str, spec: Path, worker: str, *, phase: str, stop_reason: str | None = None,
                 max_steps: int | None = None) -> str:
    """Start scenario ``name``'s run, advance it until it stops by itself (or ``max_steps``
    steps), and check it stopped in ``phase`` (and for ``stop_reason``); return its run id."""
    run_id = run_start(spec_path=spec, worker=worker)
    run_advance(run_id=run_id, worker=worker, max_steps=max_steps)
    _expect(run_id, name, phase, stop_reason)
    return run_id


def _seed_running(name: str, spec: Path, worker: str) -> str:
    run_id = run_start(spec_path=spec, worker=worker)
    try:
        runtime.workers.dispatch.run_enqueue(run_id=run_id)  # looked up at call time: stories record it
    except OperationalError:
        log.warning("demo: broker unreachable; the sweeper will hand run %s to a worker", run_id)
    return run_id


def _seed_expired(name: str, spec: Path, worker: str) -> str:
    run_id = _seed_driven(name, spec, worker, phase="awaiting_approval", stop_reason="approval_required")
    waiting = approvals_waiting(run_ids=[run_id])
    if len(waiting) != 1:
        raise DemoSetupError(f"demo scenario {name} is not in the approvals queue",
                             run_id=run_id)
    try:
        approval_grant(
            run_id=run_id,
            approver="demo-operator",
            environment_fingerprint=waiting[0].environment_fingerprint,
            ttl_seconds=1,
        )
    except OperationalError:
        pass  # the grant is committed before the enqueue; the worker is not needed here
    time.sleep(1.2)  # let the one-second approval expire (approvals are judged by wall clock)
    run_advance(run_id=run_id, worker=worker)
    _expect(run_id, name, "awaiting_approval", "approval_expired")
    return run_id


def _seed_conflict(name: str, spec: Path, worker: str, *, content: bool = False) -> str:
    run_id = _seed_driven(name, spec, worker, phase="pending", max_steps=1)
    pending = checkpoint_verify(run_id=run_id).state.pending
    if pending is None:
        raise DemoSetupError(f"demo scenario {name} has no pending write", run_id=run_id)
    other = Action(
        kind=pending.action.kind,
        target=pending.action.target,
        params=conflicting_commit(dict(pending.action.params), content=content),
        risk=pending.action.risk,
    )
    run = Run.objects.get(run_id=run_id)
    adapter = open_adapter(run.spec["task"]["environment"]["adapter"], Path(run.spec["target"]))
    adapter.execute(
        other,
        idempotency_key=pending.idempotency_key,
        intent_digest=other.intent_digest(),
        fencing_token=run.lease_version,
        blobs=lambda digest: attachment_get(digest=digest),
    )
    run_advance(run_id=run_id, worker=worker)
    _expect(run_id, name, "needs_review", "receipt_conflict")
    return run_id


def _seed_recovered(name: str, spec: Path, worker: str) -> str:
    run_id = crashed_run_recover(spec=spec, worker=worker)
    _expect(run_id, name, "completed", "verified")
    return run_id


_SEEDERS: dict[str, Callable[[str, Path, str], str]] = {
    "completed": partial(_seed_driven, phase="completed"),
    "running": _seed_running,
    "awaiting_approval": partial(_seed_driven, phase="awaiting_approval"),
    "approval_expired": _seed_expired,
    "receipt_conflict": partial(_seed_conflict, content=True),
    "receipt_conflict_2": _seed_conflict,
    "failed": partial(_seed_driven, phase="failed", stop_reason="policy_violation"),
    "recovered": _seed_recovered,
    "agent_orders": partial(_seed_driven, phase="awaiting_approval", stop_reason="approval_required"),
    "agent_ledger": partial(_seed_driven, phase="completed", stop_reason="verified"),
}
"""How each scenario is seeded: ``seeder(name, spec path, worker) -> run id``."""
