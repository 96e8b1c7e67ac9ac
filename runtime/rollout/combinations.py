"""Version combinations as deployable objects: register, select at run start, promote, roll back
(DESIGN.md section 8.4).

A combination is everything a run's decisions depend on: the task scope, the spec's model,
prompt, rules and tool-schema versions and input fingerprints, Ratchet's code version, and the
identity and code digest of every plug-in (``runtime.taskspec.plugin_pins``). Its id is the digest of
those fields. States: ``canary`` (receives ``share`` of new runs of its scope), ``active`` (the
rest), ``retired`` (replaced by a promotion), ``rolled_back`` (stopped for cause). In-flight runs
keep the combination they were pinned to: a worker only takes runs of the combinations it
advertises (``runtime.workers.dispatch``), and a worker whose code differs from the pin refuses to advance
(``CodeDigestMismatchError``). Every change is appended to the combination's history (who, when,
why); run-level changes (assignment, refusal) are in the run's trace.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from runtime.core.canonical import DigestKind, digest
from runtime.errors import CombinationNotFoundError, CombinationStateError
from runtime.evidence.trace import trace_append
from runtime.models import (
    Combination,
    CombinationEvent,
    CombinationRun,
    RegressRecord,
    Run,
    TraceEvent,
)
from runtime.rollout.pending_effects import IN_FLIGHT_PHASES, pending_keys_by_run
from runtime.taskspec import load_task_spec
from runtime.taskspec.plugin_pins import plugin_pins

STATES = ("canary", "active", "retired", "rolled_back")
QUEUE_PREFIX = "ratchet.c."
"""Celery queue of a combination: ``ratchet.c.<first 12 hex of its id>``."""


def combination_fields(*, tenant_id: str, task_id: str, versions: Mapping[str, Any],
                       plugins: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned fields of a run started by this process's code (a JSON object).

    Args:
        tenant_id, task_id: the scope; versions: the spec's ``[versions]`` (model, prompt,
            rules, tool_schema, inputs); plugins: ``runtime.taskspec.plugin_pins.plugin_pins(spec)``.
    """
    try:
        code_version = importlib.metadata.version("ratchet")
    except importlib.metadata.PackageNotFoundError:
        code_version = "unknown"
    return {"task": f"{tenant_id}/{task_id}", "model": versions.get("model"), "prompt": versions.get("prompt"),
            "rules": versions.get("rules"), "tool_schema": versions.get("tool_schema"),
            "inputs": dict(versions.get("inputs") or {}), "code_version": code_version,
            "plugins": {role: dict(identity) for role, identity in plugins.items()}}


def combination_fields_of_spec(*, spec_path: str, tenant_id: str | None = None) -> dict[str, Any]:
    """:func:`combination_fields` of a task spec file under this process's code (``register``).

    Raises:
        TaskSpecError: the spec is invalid; PluginError: a plug-in cannot be loaded.
    """
    spec = load_task_spec(spec_path)
    return combination_fields(tenant_id=tenant_id or spec.task.tenant, task_id=spec.task.id,
                              versions=spec.versions.model_dump(mode="json"), plugins=plugin_pins(spec))


def combination_id_of(fields: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"``: the digest of the pinned fields (DESIGN.md section 8.4)."""
    return digest(DigestKind.SCENARIO, {"combination": dict(fields)})


def combination_queue(combination_id: str) -> str:
    """The Celery queue of a combination's runs (``ratchet.c.<12 hex>``)."""
    return QUEUE_PREFIX + combination_id.removeprefix("sha256:")[:12]


def combination_get(*, combination_id: str) -> Combination:
    """The combination with this id or unique id prefix (``sha256:`` optional).

    Raises:
        CombinationNotFoundError: none, or the prefix is ambiguous.
    """
    wanted = combination_id if combination_id.startswith("sha256:") else "sha256:" + combination_id
    found = list(Combination.objects.filter(combination_id__startswith=wanted)[:2])
    if len(found) != 1:
        raise CombinationNotFoundError(combination_id=combination_id[:80])
    return found[0]


def _history(combo: Combination, *, kind: str, actor: str, reason: str, payload: Mapping[str, Any]) -> None:
    CombinationEvent(combination=combo, kind=kind, actor=actor, reason=reason, payload=dict(payload)).save()


def combination_register(*, fields: Mapping[str, Any], state: str = "canary", share: float = 0.0,
                         actor: str, reason: str) -> Combination:
    """Register a combination (idempotent: an existing one is returned unchanged).

    Args:
        fields: :func:`combination_fields`; state: ``canary`` or ``active``; share: 0..1, the
            fraction of new runs of the scope a canary receives; actor / reason: for the history.

    Raises:
        CombinationStateError: another state, or a share outside 0..1.
    """
    if state not in ("canary", "active") or not 0.0 <= share <= 1.0:
        raise CombinationStateError(f"register as canary or active with a share in 0..1, not {state} {share}",
                                    combination_id=combination_id_of(fields))
    cid = combination_id_of(fields)
    with transaction.atomic():
        combo, created = Combination.objects.get_or_create(
            combination_id=cid, defaults={"fields": dict(fields), "state": state, "share": share})
        if created:
            _history(combo, kind="registered", actor=actor, reason=reason, payload={"state": state, "share": share})
    return combo


def _share_point(run_id: str) -> float:
    """A run's deterministic point in [0, 1): the first 8 bytes of sha256(run id)."""
    return int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:8], "big") / 2.0**64


def combination_select(*, run_id: str, fields: Mapping[str, Any]) -> Combination:
    """The combination a new run is assigned (DESIGN.md section 8.4).

    Candidates are the registered canary and active combinations of the same task scope and
    spec versions as ``fields``. The run's point ``sha256(run id)`` in [0, 1) falls into the
    canaries' shares in id order, else to the newest active one. With no candidate at all, the
    starting process's own combination is registered as active (the first deploy).

    Raises:
        CombinationStateError: the scope has combinations but none canary or active (all rolled
            back or retired): an operator registers or promotes one.
    """
    same = {k: fields.get(k) for k in ("task", "model", "prompt", "rules", "tool_schema", "inputs")}
    scope = Combination.objects.filter(fields__task=fields.get("task"))
    candidates = [c for c in scope.filter(state__in=("canary", "active")).order_by("combination_id")
                  if {k: c.fields.get(k) for k in same} == same]
    if not candidates:
        if scope.exists() and combination_id_of(fields) in set(scope.values_list("combination_id", flat=True)):
            raise CombinationStateError("this code's combination is rolled back or retired and no other is "
                                        "active for the scope", combination_id=combination_id_of(fields))
        return combination_register(fields=fields, state="active", actor="run_start",
                                    reason="first run of the scope")
    point, edge = _share_point(run_id), 0.0
    for combo in (c for c in candidates if c.state == "canary"):
        edge += combo.share
        if point < edge:
            return combo
    active = sorted((c for c in candidates if c.state == "active"), key=lambda c: c.changed_at, reverse=True)
    if not active:
        raise CombinationStateError("no active combination takes the runs outside the canary share",
                                    combination_id=candidates[0].combination_id)
    return active[0]


def combination_assign(*, run_id: str, combination: Combination) -> None:
    """Record the run's combination (``run_start``; its ``run.started`` event names the id)."""
    CombinationRun.objects.create(run_id=run_id, combination=combination)


def combination_of_run(*, run_id: str) -> Combination | None:
    """The combination a run is pinned to (None: started before combinations existed)."""
    pin = CombinationRun.objects.select_related("combination").filter(run_id=run_id).first()
    return pin.combination if pin is not None else None


@dataclass(frozen=True)
class InFlightRun:
    """A run of a combination still in flight and its proposed writes without a receipt
    (idempotency keys)."""

    run_id: str
    phase: str
    pending_keys: list[str]


def combination_in_flight(*, combination_id: str) -> list[InFlightRun]:
    """The combination's runs in flight (any phase but ended: running, pending, awaiting approval,
    needs review) with their pending side effects, to check one by one (``runtime.rollout.pending_effects``)."""
    runs = list(Run.objects.filter(combination_pin__combination_id=combination_id, phase__in=IN_FLIGHT_PHASES)
                .values_list("run_id", "phase").order_by("run_id"))
    keys = pending_keys_by_run(run_ids=[run_id for run_id, _ in runs])
    return [InFlightRun(run_id=run_id, phase=phase, pending_keys=keys[run_id]) for run_id, phase in runs]


def combination_in_flight_counts() -> dict[str, int]:
    """``{combination_id: runs in flight}`` over every combination (one grouped query)."""
    rows = (CombinationRun.objects.filter(run__phase__in=IN_FLIGHT_PHASES).values("combination_id")
            .annotate(n=Count("run_id")).order_by())
    return {row["combination_id"]: int(row["n"]) for row in rows}


def combination_regress_record(*, combination_id: str, passed: bool, results: list[dict[str, Any]]) -> RegressRecord:
    """Store the outcome of ``manage.py regress`` for the combination (DESIGN.md section 8.5)."""
    combo = combination_get(combination_id=combination_id)
    record = RegressRecord(combination=combo, passed=passed, results=results)
    record.save()
    _history(combo, kind="regress.passed" if passed else "regress.failed", actor="regress", reason="",
             payload={"record": record.pk})
    return record


def combination_canary_metrics(*, combination_id: str) -> dict[str, int]:
    """``{"runs", "completed", "failed", "duplicates", "recoveries_failed"}`` over the combination's runs."""
    run_ids = list(CombinationRun.objects.filter(combination_id=combination_id).values_list("run_id", flat=True))
    phases = list(Run.objects.filter(run_id__in=run_ids).values_list("phase", flat=True))
    audits = TraceEvent.objects.filter(run_id__in=run_ids, event_type="audit.effects").values_list("payload", flat=True)
    return {"runs": len(run_ids), "completed": phases.count("completed"), "failed": phases.count("failed"),
            "duplicates": sum(int((p or {}).get("duplicates", 0) or 0) for p in audits),
            "recoveries_failed": TraceEvent.objects.filter(run_id__in=run_ids,
                                                           event_type="recovery.failed").count()}


def combination_promote(*, combination_id: str, actor: str, reason: str, share: float = 1.0) -> Combination:
    """Widen a canary's share, or (``share`` 1.0) make it active and retire the scope's old active ones.

    Requires at least ``RATCHET_CANARY_MIN_RUNS`` completed canary runs, none failed, no duplicate
    submission, no failed recovery, and a passing regress record newer than the registration
    (DESIGN.md sections 8.4 and 8.5).

    Raises:
        CombinationNotFoundError; CombinationStateError: not a canary, or a rule above fails (the
            message names it).
    """
    combo = combination_get(combination_id=combination_id)
    cid = combo.combination_id
    if combo.state != "canary":
        raise CombinationStateError(f"only a canary is promoted; this one is {combo.state}", combination_id=cid)
    metrics = combination_canary_metrics(combination_id=cid)
    minimum = int(settings.RATCHET_CANARY_MIN_RUNS)
    problems = []
    if metrics["completed"] < minimum:
        problems.append(f"{metrics['completed']} completed canary runs, {minimum} required")
    problems += [f"{metrics[name]} {name.replace('_', ' ')}" for name in ("failed", "duplicates", "recoveries_failed")
                 if metrics[name]]
    if not RegressRecord.objects.filter(combination=combo, passed=True).exists():
        problems.append("no passing `manage.py regress` record")
    if problems:
        raise CombinationStateError("promotion refused: " + "; ".join(problems), combination_id=cid)
    with transaction.atomic():
        now = timezone.now()
        if share >= 1.0:
            old = list(Combination.objects.select_for_update().filter(
                fields__task=combo.fields.get("task"), state="active").exclude(combination_id=cid))
            for other in old:
                Combination.objects.filter(pk=other.pk).update(state="retired", share=0.0, changed_at=now)
                _history(other, kind="retired", actor=actor, reason=f"replaced by {cid[:19]}: {reason}", payload={})
            Combination.objects.filter(pk=cid).update(state="active", share=1.0, changed_at=now)
            _history(combo, kind="promoted", actor=actor, reason=reason,
                     payload={"metrics": metrics, "retired": [o.combination_id for o in old]})
        else:
            Combination.objects.filter(pk=cid).update(share=share, changed_at=now)
            _history(combo, kind="widened", actor=actor, reason=reason, payload={"metrics": metrics, "share": share})
    return combination_get(combination_id=cid)


def combination_rollback(*, combination_id: str, actor: str, reason: str) -> list[InFlightRun]:
    """Roll the whole combination back: it takes no new run; its in-flight runs are listed.

    In-flight runs are not moved to other code (that is what pinning forbids): they finish on
    the combination's workers or are cancelled by an operator, each pending side effect checked
    (DESIGN.md section 8.4). Idempotent for an already rolled-back combination.

    Returns:
        The in-flight runs with their pending side effects (also kept in the history entry).
    """
    combo = combination_get(combination_id=combination_id)
    in_flight = combination_in_flight(combination_id=combo.combination_id)
    listed = [{"run_id": r.run_id, "phase": r.phase, "pending": r.pending_keys} for r in in_flight]
    with transaction.atomic():
        updated = Combination.objects.filter(pk=combo.pk).exclude(state="rolled_back").update(
            state="rolled_back", share=0.0, changed_at=timezone.now())
        if updated:
            _history(combo, kind="rolled_back", actor=actor, reason=reason, payload={"in_flight": listed})
    if updated:
        for run in in_flight:
            trace_append(run_id=run.run_id, event_type="combination.rolled_back",
                         payload={"combination_id": combo.combination_id, "pending": run.pending_keys})
    return in_flight


def combination_canaries_check(*, tenant_id: str, task_id: str) -> list[str]:
    """Roll back every canary of the scope whose runs produced a duplicate submission (called by
    the admission gate, DESIGN.md sections 8.3 and 8.4); returns the rolled-back ids."""
    rolled = []
    for combo in Combination.objects.filter(Q(fields__task=f"{tenant_id}/{task_id}"), state="canary"):
        duplicates = combination_canary_metrics(combination_id=combo.combination_id)["duplicates"]
        if duplicates:
            combination_rollback(combination_id=combo.combination_id, actor="admission",
                                 reason=f"{duplicates} duplicate submission(s) from canary runs")
            rolled.append(combo.combination_id)
    return rolled


def combination_refusal_trace(*, run_id: str, worker: str, error: Exception) -> None:
    """Trace that a worker refused to advance a run under code other than its pinned combination."""
    trace_append(run_id=run_id, event_type="combination.refused",
                 payload={"worker": worker, "error": type(error).__name__, "message": str(error)[:500]})
