"""Starting a run: admission, then prepare and observe the environment, checkpoint generation 1
(DESIGN.md sections 4 and 8.3)."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import run_create
from runtime.checkpoints.session import default_worker_id, store_observation
from runtime.core.checkpoint import BudgetLimits, Phase, RunIdentity, RunState, Scope, VersionSet
from runtime.core.tracing import run_scope, run_span
from runtime.errors import MarkPendingError
from runtime.ownership.leases import lease_release
from runtime.planners.base import planner_state_check
from runtime.planners.factory import build_planner
from runtime.rollout.admission import admission_check
from runtime.rollout.combinations import combination_assign, combination_fields, combination_select
from runtime.taskspec import load_task_spec, scenario_fingerprint
from runtime.taskspec.plugin_pins import plugin_pins

log = logging.getLogger("runtime.engine")


def run_start(*, spec_path: str | Path, worker: str | None = None, ttl_seconds: float | None = None,
              tenant_id: str | None = None, base_dir: str | Path | None = None) -> str:
    """Create a run from a task spec file and checkpoint generation 1; returns the run id.

    Prepares the environment if the spec asks for it (a fresh clone at the replay base), observes
    it, computes the scenario fingerprint over spec + initial state (DESIGN.md section 4), and
    commits the first checkpoint under a fresh lease, which is released at once: driving the run
    is ``run_advance``'s job.

    Args:
        spec_path: the task spec file (TOML or JSON); relative paths in it resolve against its
            directory.
        worker: the worker id for the creation lease (default: this process's id).
        ttl_seconds: lease time to live in seconds (default ``RATCHET_LEASE_SECONDS``).
        tenant_id: the tenant (default: the spec's).
        base_dir: the directory the spec's other relative paths resolve against (default the spec
            file's; a run started again from a stored spec keeps its first run's, DESIGN.md section 6.12).

    Raises:
        TaskSpecError: the spec file is invalid.
        AdmissionClosedError: a rollout threshold of the tenant and task is crossed (DESIGN.md
            section 8.3); nothing was created or prepared.
        CombinationStateError: the scope has no canary or active combination for this spec
            (DESIGN.md section 8.4); nothing was created.
        PlannerError / AdapterError: the environment cannot be prepared or observed.
        MarkPendingError: the run was created (its first checkpoint committed, combination
            assigned, lease released) but its high-water mark could not be moved; recovery
            resumes it once the mark store answers.
    """
    spec_file = Path(spec_path).resolve()
    spec = load_task_spec(spec_file)
    admission_check(tenant_id=tenant_id or spec.task.tenant, task_id=spec.task.id)
    base_dir = Path(base_dir) if base_dir is not None else spec_file.parent
    ttl = ttl_seconds or settings.RATCHET_LEASE_SECONDS
    worker = worker or default_worker_id()
    run_id = uuid.uuid4().hex
    # The run gets its trace from its id (DESIGN.md section 8.6); whoever started it is linked.
    with run_scope(run_id), run_span("ratchet.run.start", run_id=run_id,
                                     attributes={"ratchet.task_id": spec.task.id, "ratchet.worker": worker,
                                                 "ratchet.adapter": spec.environment.adapter}):
        target = spec.resolve_target(base_dir)
        if spec.environment.setup != "none":
            # A prepared environment is new for every run: the run id names its directory.
            target = target / run_id
            spec = spec.model_copy(update={"environment": spec.environment.model_copy(update={"target": str(target)})})
        planner = build_planner(spec, base_dir=base_dir)
        pins = plugin_pins(spec)  # which code made this run's decisions, checked on every resume
        # The run is assigned a deployed combination (canary share by its id); it is pinned to that
        # combination's plug-ins, so only workers of that combination can advance it (section 8.4).
        combination = combination_select(run_id=run_id, fields=combination_fields(
            tenant_id=tenant_id or spec.task.tenant, task_id=spec.task.id,
            versions=spec.versions.model_dump(mode="json"), plugins=pins))
        pins = combination.fields["plugins"]
        planner.prepare_environment(target)
        adapter = open_adapter(spec.environment.adapter, target, entry=spec.environment.entry,
                               options=spec.environment.options)
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
            planner_state=planner_state_check(planner.init_state()),
            started_at=datetime.now(UTC),
        )
        stored_spec = {
            "task": spec.model_dump(mode="json"),
            "base_dir": str(base_dir),
            "target": str(target),
            "plugins": pins,
            "initial": {"instance_id": obs.instance_id, "version": obs.version,
                        "state_fingerprint": obs.state_fingerprint, "kind": obs.kind},
        }
        pending: MarkPendingError | None = None
        try:
            result = run_create(
                state=state, worker=worker, ttl_seconds=ttl, spec=stored_spec,
                events=[("run.started", {"task_id": spec.task.id, "task_version": spec.task.version,
                                         "scenario_fingerprint": scenario,
                                         "environment": env_ref.model_dump(mode="json"),
                                         "plugins": pins, "combination_id": combination.combination_id})],
            )
        except MarkPendingError as exc:
            # Created (its first checkpoint is committed; DESIGN.md section 4.3): it still gets its
            # combination and a free lease, so recovery resumes it as it would any other run.
            result, pending = exc.committed, exc
        combination_assign(run_id=run_id, combination=combination)
        lease_release(lease=result.lease)  # traces "lease.released" in the same transaction
        if pending is not None:
            raise pending
        log.debug("run %s created at generation %s", run_id, result.generation)
        return run_id
