"""Demo seeding: runs in every state, made by replaying real history of this repository.

``demo_seed`` writes one git-history replay task per scenario (TOML, under ``<workdir>/tasks``)
and drives each run through the real services -- ``run_start``, ``run_advance``,
``approval_grant``, and a conflicting write made straight at the adapter -- so every state on the
dashboard is one the runtime reached on its own, with real checkpoints, receipts and trace:

===================  =========================================================================
scenario             how it is reached
===================  =========================================================================
completed            a two-commit replay driven to the end (verifier passed)
running              a seven-commit replay left to the Celery worker (it completes on its own)
awaiting_approval    ``approval_risks = ["low"]``: the first commit waits for an operator
approval_expired     approved with a one-second approval, which expired before the write ran
receipt_conflict     the pending key was used by another caller for a different commit (same
                     files, another message): frozen in needs_review with a review case
failed               the policy allows only ``write_file``, so the first ``commit`` is refused
===================  =========================================================================

Seeding is idempotent: the run ids go to ``<workdir>/seeded.json`` and a second call returns them
without starting new runs while those runs still exist.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.errors import DemoSetupError, RatchetError

log = logging.getLogger("runtime.demo")

MARKER = "seeded.json"


@dataclass(frozen=True)
class Scenario:
    """One demo run: replay the source's first-parent commits after ``HEAD~base`` up to
    ``HEAD~tip``; ``approval_risks`` and ``allowed_actions`` go into the task's policy."""

    name: str
    base: int
    tip: int
    approval_risks: tuple[str, ...] = ()
    allowed_actions: tuple[str, ...] = ("commit",)
    description: str = ""


SCENARIOS = (
    Scenario("completed", 4, 2, description="replayed to the end; the verifier passed"),
    Scenario("running", 7, 0, description="a longer replay the worker is driving"),
    Scenario(
        "awaiting_approval",
        1,
        0,
        approval_risks=("low",),
        description="its first commit waits for an operator's approval",
    ),
    Scenario(
        "approval_expired",
        2,
        1,
        approval_risks=("low",),
        description="approved for one second; the approval expired before the write",
    ),
    Scenario(
        "receipt_conflict",
        3,
        1,
        description="another caller used the pending key for a different commit",
    ),
    Scenario(
        "failed",
        1,
        0,
        allowed_actions=("write_file",),
        description="the policy does not allow commits, so the first one is refused",
    ),
)
"""Every scenario, in the order they are seeded."""

MIN_COMMITS = max(s.base for s in SCENARIOS) + 1
"""First-parent commits the source needs (``HEAD~7`` must exist)."""

TASK_TEMPLATE = """\
# Demo scenario "{name}": {description}.
# Written by `manage.py demo`; replays {base_rev}..{tip_rev} of {source_name}.

[task]
id = "demo-{name_dashed}"
version = "1"

[versions]
model = "none"
prompt = "none"
rules = "replay-v1"
tool_schema = "git-commit-v1"

[policy]
id = "demo-{name_dashed}"
version = "1"
allowed_actions = {allowed_actions}
allowed_paths = ["**"]
permissions = ["git.commit"]
approval_risks = {approval_risks}

[policy.budgets]
proposals = 40
steps = 40
wall_seconds = 900
cost_micros = 0

[environment]
adapter = "git"
target = "../targets/{name}"
setup = "clone-at-base"

[planner]
kind = "git-history"
source = {source}
range = "{base_rev}..{tip_rev}"
risk = "low"

[verifier]
kind = "tree-equals-source"
"""


@dataclass(frozen=True)
class DemoSeed:
    """What :func:`demo_seed` did: ``runs`` maps scenario name to run id; ``created`` is False
    when the runs of an earlier seeding were found and reused."""

    runs: dict[str, str]
    created: bool


def _toml_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def task_write(*, scenario: Scenario, source: Path, workdir: Path, revs: dict[int, str]) -> Path:
    """Write the scenario's task spec to ``<workdir>/tasks/<name>.toml`` and return its path."""
    path = workdir / "tasks" / f"{scenario.name}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        TASK_TEMPLATE.format(
            name=scenario.name,
            name_dashed=scenario.name.replace("_", "-"),
            description=scenario.description,
            source=json.dumps(str(source)),
            source_name=source.name,
            base_rev=revs[scenario.base],
            tip_rev=revs[scenario.tip],
            allowed_actions=_toml_list(scenario.allowed_actions),
            approval_risks=_toml_list(scenario.approval_risks),
        ),
        encoding="utf-8",
    )
    return path


def _revisions(source: Path) -> dict[int, str]:
    from runtime.planners.git_history import rev_parse_commit, run_git

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
    from runtime.models import Run

    try:
        runs = json.loads((workdir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(runs, dict) or set(runs) != {s.name for s in SCENARIOS}:
        return None
    if Run.objects.filter(run_id__in=list(runs.values())).count() != len(runs):
        return None  # the database was reset since: seed again
    return runs


def demo_seed(*, source: Path, workdir: Path, worker: str = "demo-seeder") -> DemoSeed:
    """Seed one run per :data:`SCENARIOS` entry from ``source``'s history (idempotent).

    Args:
        source: a git repository with at least :data:`MIN_COMMITS` first-parent commits (the
            demo uses this repository's root).
        workdir: where task specs, replay targets and the marker go (``var/demo``).
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
    for scenario in SCENARIOS:
        spec = task_write(scenario=scenario, source=source, workdir=workdir, revs=revs)
        runs[scenario.name] = _SEEDERS[scenario.name](spec, worker)
        log.info("demo: seeded %s as run %s", scenario.name, runs[scenario.name])
    (workdir / MARKER).write_text(json.dumps(runs, indent=2) + "\n", encoding="utf-8")
    return DemoSeed(runs=runs, created=True)


def _expect(run_id: str, name: str, phase: str, stop_reason: str | None = None) -> None:
    from runtime.models import Run

    row = Run.objects.filter(run_id=run_id).values("phase", "stop_reason").first()
    if row is None or row["phase"] != phase or (stop_reason and row["stop_reason"] != stop_reason):
        got = f"{row['phase']} ({row['stop_reason']})" if row else "missing"
        raise DemoSetupError(f"demo scenario {name} should be {phase} but is {got}", run_id=run_id)


def _seed_completed(spec: Path, worker: str) -> str:
    from runtime.engine import run_advance, run_start

    run_id = run_start(spec_path=spec, worker=worker)
    run_advance(run_id=run_id, worker=worker)
    _expect(run_id, "completed", "completed")
    return run_id


def _seed_running(spec: Path, worker: str) -> str:
    from kombu.exceptions import OperationalError

    from runtime.engine import run_start
    from runtime.tasks import run_enqueue

    run_id = run_start(spec_path=spec, worker=worker)
    try:
        run_enqueue(run_id=run_id)
    except OperationalError:
        log.warning("demo: broker unreachable; the sweeper will hand run %s to a worker", run_id)
    return run_id


def _seed_awaiting(spec: Path, worker: str) -> str:
    from runtime.engine import run_advance, run_start

    run_id = run_start(spec_path=spec, worker=worker)
    run_advance(run_id=run_id, worker=worker)
    _expect(run_id, "awaiting_approval", "awaiting_approval")
    return run_id


def _seed_expired(spec: Path, worker: str) -> str:
    from kombu.exceptions import OperationalError

    from runtime.approvals import approval_grant, approvals_waiting
    from runtime.engine import run_advance, run_start

    run_id = run_start(spec_path=spec, worker=worker)
    run_advance(run_id=run_id, worker=worker)
    _expect(run_id, "approval_expired", "awaiting_approval", "approval_required")
    waiting = approvals_waiting(run_ids=[run_id])
    if len(waiting) != 1:
        raise DemoSetupError("demo scenario approval_expired is not in the approvals queue",
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
    _expect(run_id, "approval_expired", "awaiting_approval", "approval_expired")
    return run_id


def conflicting_commit(action_params: dict[str, Any]) -> dict[str, Any]:
    """Parameters of a *different* commit with the same file changes: another caller's message.

    Used to stage a receipt conflict (DESIGN.md section 6): same idempotency key, different
    intent digest. Because the files are the same, a reviewer's replan can still finish with
    the replayed tree equal to the source's.
    """
    return {
        **action_params,
        "message": "Not what the plan said: another caller reused this key\n",
        "author_name": "Another Caller",
        "author_email": "other@example.invalid",
    }


def _seed_conflict(spec: Path, worker: str) -> str:
    from runtime.adapters import open_adapter
    from runtime.attachments import attachment_get
    from runtime.checkpoints import checkpoint_verify
    from runtime.core.checkpoint import Action
    from runtime.engine import run_advance, run_start
    from runtime.models import Run

    run_id = run_start(spec_path=spec, worker=worker)
    run_advance(run_id=run_id, worker=worker, max_steps=1)
    _expect(run_id, "receipt_conflict", "pending")
    pending = checkpoint_verify(run_id=run_id).state.pending
    if pending is None:
        raise DemoSetupError("demo scenario receipt_conflict has no pending write", run_id=run_id)
    other = Action(
        kind=pending.action.kind,
        target=pending.action.target,
        params=conflicting_commit(dict(pending.action.params)),
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
    _expect(run_id, "receipt_conflict", "needs_review", "receipt_conflict")
    return run_id


def _seed_failed(spec: Path, worker: str) -> str:
    from runtime.engine import run_advance, run_start

    run_id = run_start(spec_path=spec, worker=worker)
    run_advance(run_id=run_id, worker=worker)
    _expect(run_id, "failed", "failed", "policy_violation")
    return run_id


_SEEDERS = {
    "completed": _seed_completed,
    "running": _seed_running,
    "awaiting_approval": _seed_awaiting,
    "approval_expired": _seed_expired,
    "receipt_conflict": _seed_conflict,
    "failed": _seed_failed,
}
