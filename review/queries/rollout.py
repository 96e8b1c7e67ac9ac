"""What the rollout pages show: admission scopes with their state and thresholds, their audit
trail and runs with pending side effects, and the version combinations (DESIGN.md sections 8.3
and 8.4). Read only; every list is narrowed to the tenants the user may see (``review.scope``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from review.scope import scope_allows, scope_sees_all
from runtime.models import AdmissionDecision, AdmissionThresholdChange, Combination, CombinationEvent
from runtime.rollout.admission import AdmissionState, admission_scopes, admission_state
from runtime.rollout.admission_thresholds import (
    WILDCARD,
    ThresholdValue,
    admission_threshold_changes,
    admission_thresholds_explained,
)
from runtime.rollout.combinations import (
    InFlightRun,
    combination_canary_metrics,
    combination_in_flight,
    combination_in_flight_counts,
    combination_queue,
)
from runtime.rollout.pending_effects import PendingRun, pending_runs_of_scope

MAX_SCOPES = 200
"""Scopes listed on the overview (each costs a few queries); the rest are reached by URL."""
MAX_COMBINATIONS = 100
PENDING_LIMIT = 200


def rollout_scope_allowed(*, user: Any, tenant_id: str) -> bool:
    """Whether ``user`` may see and change a scope of ``tenant_id`` (``"*"``: only a user who
    sees every tenant, since a global threshold applies to all of them)."""
    if tenant_id == WILDCARD:
        return scope_sees_all(user=user)
    return scope_allows(user=user, tenant_id=tenant_id)


def combination_tenant(combo: Combination) -> str:
    """The tenant of a combination's scope (its ``task`` field is ``tenant/task``)."""
    return str(combo.fields.get("task") or "").split("/", 1)[0]


@dataclass(frozen=True)
class Overview:
    """The rollout overview: scopes (closed first), tenants for tenant-wide thresholds, and
    whether the user may edit the global ones."""

    states: list[AdmissionState]
    tenants: list[str]
    sees_all: bool
    truncated: bool


def rollout_overview(*, user: Any) -> Overview:
    """Every known scope the user may see with its admission state, closed ones first."""
    scopes = [(t, k) for t, k in admission_scopes() if scope_allows(user=user, tenant_id=t)]
    states = [admission_state(tenant_id=t, task_id=k) for t, k in scopes[:MAX_SCOPES]]
    states.sort(key=lambda s: (s.open, s.tenant_id, s.task_id))
    return Overview(states=states, tenants=sorted({t for t, _ in scopes}), sees_all=scope_sees_all(user=user),
                    truncated=len(scopes) > MAX_SCOPES)


@dataclass(frozen=True)
class ScopeView:
    """One scope's page: state (None for ``tenant/*`` and ``*/*``), effective thresholds with
    their source, the audit trail, re-open decisions and runs with pending side effects."""

    tenant_id: str
    task_id: str
    state: AdmissionState | None
    thresholds: list[ThresholdValue]
    changes: list[AdmissionThresholdChange]
    decisions: list[AdmissionDecision]
    pending_runs: list[PendingRun] = field(default_factory=list)
    pending_total: int = 0

    @property
    def wide(self) -> bool:
        return WILDCARD in (self.tenant_id, self.task_id)


def admission_scope_view(*, tenant_id: str, task_id: str) -> ScopeView:
    """The page of one scope (the view checks the user's tenant scope first)."""
    wide = WILDCARD in (tenant_id, task_id)
    runs, total = ([], 0) if wide else pending_runs_of_scope(tenant_id=tenant_id, task_id=task_id,
                                                              limit=PENDING_LIMIT)
    return ScopeView(
        tenant_id=tenant_id, task_id=task_id,
        state=None if wide else admission_state(tenant_id=tenant_id, task_id=task_id),
        thresholds=admission_thresholds_explained(tenant_id=tenant_id, task_id=task_id),
        changes=admission_threshold_changes(tenant_id=tenant_id, task_id=task_id),
        decisions=list(AdmissionDecision.objects.filter(tenant_id=tenant_id, task_id=task_id)
                       .order_by("-decided_at")[:20]),
        pending_runs=runs, pending_total=total)


@dataclass(frozen=True)
class CombinationRow:
    """A combination in the list: the row, its scope, queue, runs in flight and canary metrics."""

    combination: Combination
    scope: str
    queue: str
    in_flight: int
    metrics: dict[str, int]


def combination_rows(*, user: Any) -> list[CombinationRow]:
    """The newest :data:`MAX_COMBINATIONS` combinations of tenants the user may see."""
    counts = combination_in_flight_counts()
    rows = []
    for combo in Combination.objects.order_by("-changed_at", "combination_id")[:MAX_COMBINATIONS]:
        if not scope_allows(user=user, tenant_id=combination_tenant(combo)):
            continue
        rows.append(CombinationRow(
            combination=combo, scope=str(combo.fields.get("task") or ""), queue=combination_queue(combo.combination_id),
            in_flight=counts.get(combo.combination_id, 0),
            metrics=combination_canary_metrics(combination_id=combo.combination_id)))
    return rows


@dataclass(frozen=True)
class CombinationView:
    """One combination's page: its row, pinned fields, history and in-flight runs."""

    row: CombinationRow
    history: list[CombinationEvent]
    in_flight: list[InFlightRun]


def combination_view(*, combo: Combination) -> CombinationView:
    """The page of one combination (the view checks the user's tenant scope first)."""
    in_flight = combination_in_flight(combination_id=combo.combination_id)
    row = CombinationRow(combination=combo, scope=str(combo.fields.get("task") or ""),
                         queue=combination_queue(combo.combination_id), in_flight=len(in_flight),
                         metrics=combination_canary_metrics(combination_id=combo.combination_id))
    return CombinationView(row=row, history=list(combo.history.order_by("-at", "-id")[:200]), in_flight=in_flight)
