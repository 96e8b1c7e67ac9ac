"""The rollout log of a run: what the admission gate and the run's version combination did while
the run existed, for its evidence bundle (DESIGN.md sections 8.3 and 8.4).

Admission closings, re-opens and threshold changes concern a tenant and task, not one run, and a
combination's state changes concern all its runs; writing them into every affected run's hash
chain would interleave operator actions with the worker's own events. So they stay in their own
append-only tables and each run's bundle carries the slice that applies to it, under the
bundle's export signature:

* ``admission``: the run's scope's ``admission.closed`` (``AdmissionClosing``),
  ``admission.reopened`` (``AdmissionDecision``: the signed body, key id and signature, so a
  holder of the reviewer public key re-checks it) and ``admission.threshold_changed``
  (``AdmissionThresholdChange`` of ``tenant/task``, ``tenant/*`` and ``*/*``) since the run's
  creation, oldest first;
* ``combination``: the run's combination (id, state, share) and its whole history.

Run-level consequences stay in the run's trace as before (``combination.rolled_back`` in each
in-flight run, ``combination.refused`` by a worker).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from django.db.models import Q

from runtime.models import (
    AdmissionClosing,
    AdmissionDecision,
    AdmissionThresholdChange,
    CombinationEvent,
    CombinationRun,
    Run,
)

LIMIT = 500
"""Rows taken per table; ``truncated`` says when a table had more."""


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _number(value: float | None) -> float | str | None:
    # A p95 in the open-ended histogram bucket is infinite, which canonical JSON cannot carry.
    return value if value is None or math.isfinite(value) else str(value)


def rollout_log(*, run: Run, limit: int = LIMIT) -> dict[str, Any]:
    """The rollout log of ``run`` (a JSON-ready dict, see the module docstring).

    Args:
        run: the run row (its scope and ``created_at`` bound the admission entries).
        limit: rows taken per table at most (oldest first).

    Returns:
        ``{"scope", "since", "admission": [...], "combination": {...} | None, "truncated": bool}``.
    """
    tenant, task, since = run.tenant_id, run.task_id, run.created_at
    truncated = False
    entries: list[dict[str, Any]] = []

    def take(rows: Any) -> list[Any]:
        nonlocal truncated
        found = list(rows[:limit + 1])
        truncated = truncated or len(found) > limit
        return found[:limit]

    scope = Q(tenant_id=tenant, task_id=task)
    for row in take(AdmissionClosing.objects.filter(scope, closed_at__gte=since).order_by("closed_at", "id")):
        entries.append({"kind": "admission.closed", "at": _iso(row.closed_at), "metric": row.metric,
                        "value": _number(row.value), "threshold": _number(row.threshold)})
    for row in take(AdmissionDecision.objects.filter(scope, decided_at__gte=since).order_by("decided_at", "id")):
        entries.append({"kind": "admission.reopened", "at": _iso(row.decided_at), "decided_by": row.decided_by,
                        "reason": row.reason, "body": row.body, "key_id": row.key_id, "signature": row.signature})
    wider = scope | Q(tenant_id=tenant, task_id="*") | Q(tenant_id="*", task_id="*")
    for row in take(AdmissionThresholdChange.objects.filter(wider, changed_at__gte=since)
                    .order_by("changed_at", "id")):
        entries.append({"kind": "admission.threshold_changed", "at": _iso(row.changed_at),
                        "scope": f"{row.tenant_id}/{row.task_id}", "name": row.name, "old": _number(row.old_value),
                        "new": _number(row.new_value), "changed_by": row.changed_by, "reason": row.reason})
    entries.sort(key=lambda e: e["at"])

    combination = None
    pin = CombinationRun.objects.select_related("combination").filter(run_id=run.run_id).first()
    if pin is not None:
        combo = pin.combination
        history = take(CombinationEvent.objects.filter(combination=combo).order_by("at", "id"))
        combination = {"combination_id": combo.combination_id, "state": combo.state, "share": combo.share,
                       "history": [{"kind": e.kind, "at": _iso(e.at), "actor": e.actor, "reason": e.reason,
                                    "payload": e.payload} for e in history]}
    return {"scope": f"{tenant}/{task}", "since": _iso(since), "admission": entries,
            "combination": combination, "truncated": truncated}
