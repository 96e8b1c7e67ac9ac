"""The admission gate: refuse new runs of a tenant and task whose rollout metrics crossed a
threshold over a sliding window, until an admin re-opens it (DESIGN.md section 8.3).

Read from the counters of ``runtime.observability.metrics`` (one grouped ``SELECT`` over the window's buckets,
no trace scan). Thresholds, per tenant and task, from settings with safe defaults:

* ``min_success_rate`` (0.9): decided recoveries succeeded over all, once there are at least
  ``min_recoveries`` (10) decided recoveries in the window;
* ``max_p95_seconds`` (60): p95 of the succeeded recoveries' duration, estimated as the upper
  bound of the histogram bucket holding the 95th percentile (same minimum count);
* ``max_duplicates`` (0): duplicate submissions; one duplicate closes admission at once.

Blocked runs (a worker lacked a run's plug-in, DESIGN.md section 5.14) are reported beside them
(``blocked``) and close nothing: they are no failed recovery, and what fixes them is a worker
restart, not a closed gate.

``RATCHET_ADMISSION_THRESHOLDS`` (JSON ``{"tenant/task" | "tenant/*" | "*": {name: value}}``)
overrides them, and admins' overrides in the dashboard override both
(``runtime.rollout.admission_thresholds``). The first refusal after a re-open records an
``AdmissionClosing``. Runs in flight are never touched: only ``run_start`` asks. An admin
re-opens a scope with a decision signed by the reviewer trust root (:func:`admission_reopen`);
counters in buckets that started before it no longer count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from runtime.core.canonical import canonical_json
from runtime.core.signing import Signature, TrustRoot
from runtime.errors import AdmissionClosedError, AdmissionScopeUnknownError
from runtime.keys import keyring_for, signer_for
from runtime.models import (
    AdmissionClosing,
    AdmissionDecision,
    AdmissionThreshold,
    AdmissionThresholdChange,
    MetricCounter,
    Run,
)
from runtime.observability.rules import DURATION_BUCKETS_SECONDS
from runtime.rollout.admission_thresholds import Thresholds, admission_thresholds
from runtime.rollout.combinations import combination_canaries_check

__all__ = ["AdmissionState", "Thresholds", "admission_check", "admission_closed_scopes", "admission_reopen",
           "admission_scope_known", "admission_scopes", "admission_state", "admission_thresholds"]


@dataclass(frozen=True)
class AdmissionState:
    """A scope's metrics over its window and the first threshold crossed (``metric`` None: open)."""

    tenant_id: str
    task_id: str
    recoveries: int
    success_rate: float | None
    p95_seconds: float | None
    duplicates: int
    since: datetime | None
    metric: str | None = None
    value: float | None = None
    threshold: float | None = None
    blocked: int = 0
    """Times in the window a worker could not drive a run for want of its plug-in (informational)."""

    @property
    def open(self) -> bool:
        return self.metric is None

    def as_dict(self) -> dict:
        return asdict(self)


def _p95_upper_bound(buckets: dict[str, float]) -> float | None:
    total = sum(buckets.values())
    if not total:
        return None
    running = 0.0
    for bound in [*(f"{b:g}" for b in DURATION_BUCKETS_SECONDS), "+Inf"]:
        running += buckets.get(bound, 0.0)
        if running >= 0.95 * total:
            return float("inf") if bound == "+Inf" else float(bound)
    return float("inf")


def admission_state(*, tenant_id: str, task_id: str) -> AdmissionState:
    """The scope's window metrics and whether a threshold is crossed (DESIGN.md section 8.3).

    The window is the last ``window_seconds``, cut at the newest re-open decision.
    """
    limits = admission_thresholds(tenant_id=tenant_id, task_id=task_id)
    now = timezone.now().timestamp()
    start = now - limits.window_seconds
    since = (AdmissionDecision.objects.filter(tenant_id=tenant_id, task_id=task_id)
             .order_by("-decided_at").values_list("decided_at", flat=True).first())
    cells = MetricCounter.objects.filter(tenant_id=tenant_id, task_id=task_id, window_start__gte=int(start),
                                         name__in=("recoveries_succeeded", "recoveries_failed",
                                                   "duplicate_submissions", "recovery_duration_bucket",
                                                   "runs_blocked"))
    if since is not None:
        cells = cells.filter(window_start__gt=int(since.timestamp()))
    rows = cells.values("name", "label").annotate(total=Sum("value")).order_by()
    sums: dict[str, float] = {}
    buckets: dict[str, float] = {}
    for row in rows:
        if row["name"] == "recovery_duration_bucket":
            buckets[row["label"]] = float(row["total"] or 0)
        else:
            sums[row["name"]] = float(row["total"] or 0)
    succeeded, failed = int(sums.get("recoveries_succeeded", 0)), int(sums.get("recoveries_failed", 0))
    decided = succeeded + failed
    rate = succeeded / decided if decided else None
    p95 = _p95_upper_bound(buckets)
    duplicates = int(sums.get("duplicate_submissions", 0))
    state = dict(tenant_id=tenant_id, task_id=task_id, recoveries=decided, success_rate=rate, p95_seconds=p95,
                 duplicates=duplicates, since=since, blocked=int(sums.get("runs_blocked", 0)))
    if duplicates > limits.max_duplicates:
        return AdmissionState(**state, metric="duplicate_submissions", value=duplicates,
                              threshold=limits.max_duplicates)
    if decided >= limits.min_recoveries and rate is not None and rate < limits.min_success_rate:
        return AdmissionState(**state, metric="recovery_success_rate", value=round(rate, 4),
                              threshold=limits.min_success_rate)
    if sum(buckets.values()) >= limits.min_recoveries and p95 is not None and p95 > limits.max_p95_seconds:
        return AdmissionState(**state, metric="recovery_duration_p95_seconds", value=p95,
                              threshold=limits.max_p95_seconds)
    return AdmissionState(**state)


def admission_check(*, tenant_id: str, task_id: str) -> None:
    """Refuse a new run of the scope when a threshold is crossed (called by ``run_start``).

    Raises:
        AdmissionClosedError: names the metric, its value, the threshold and the window.

    First, a canary combination of the scope whose runs produced a duplicate submission is
    rolled back (DESIGN.md section 8.4), so a re-opened scope does not send it new runs again.
    The first refusal since the scope's last re-open is recorded (``AdmissionClosing``), so the
    rollout log of the scope's runs says when admission closed and why.
    """
    combination_canaries_check(tenant_id=tenant_id, task_id=task_id)
    state = admission_state(tenant_id=tenant_id, task_id=task_id)
    if not state.open:
        _closing_record(state)
        raise AdmissionClosedError(
            f"new runs are refused: {state.metric} is {state.value}, threshold {state.threshold}",
            tenant_id=tenant_id, task_id=task_id, metric=state.metric, value=state.value,
            threshold=state.threshold,
            window_seconds=admission_thresholds(tenant_id=tenant_id, task_id=task_id).window_seconds)


def _closing_record(state: AdmissionState) -> None:
    # Two refusals at the same moment may both write a row; the log then shows the closing twice,
    # which is harmless, while a lock here would serialise every refused start.
    earlier = AdmissionClosing.objects.filter(tenant_id=state.tenant_id, task_id=state.task_id)
    if state.since is not None:
        earlier = earlier.filter(closed_at__gt=state.since)
    if not earlier.exists():
        AdmissionClosing(tenant_id=state.tenant_id, task_id=state.task_id, metric=str(state.metric),
                         value=float(state.value or 0), threshold=float(state.threshold or 0),
                         closed_at=timezone.now()).save()


def admission_closed_scopes() -> list[AdmissionState]:
    """Every scope with counters in the default window whose admission is closed (the banner)."""
    start = int(timezone.now().timestamp() - settings.RATCHET_ADMISSION_WINDOW_SECONDS)
    scopes = (MetricCounter.objects.filter(window_start__gte=start, name__in=(
        "recoveries_failed", "duplicate_submissions", "recovery_duration_bucket"))
        .values_list("tenant_id", "task_id").distinct().order_by("tenant_id", "task_id"))
    states = [admission_state(tenant_id=t, task_id=k) for t, k in scopes]
    return [s for s in states if not s.open]


_SCOPE_SOURCES = (Run, MetricCounter, AdmissionThreshold, AdmissionThresholdChange, AdmissionDecision)
"""Tables whose rows name a scope; a scope none of them names was never seen."""


def admission_scopes(*, tenant_id: str | None = None) -> list[tuple[str, str]]:
    """Every known ``(tenant, task)`` scope, sorted: those with runs, metric counters, threshold
    overrides (not the ``*`` ones) or re-open decisions; only ``tenant_id``'s when given."""
    found: set[tuple[str, str]] = set()
    for model in _SCOPE_SOURCES:
        rows = model.objects.all() if tenant_id is None else model.objects.filter(tenant_id=tenant_id)
        found.update(rows.values_list("tenant_id", "task_id").distinct().order_by())
    return sorted((t, k) for t, k in found if "*" not in (t, k))


def admission_scope_known(*, tenant_id: str, task_id: str) -> bool:
    """Whether anything names this scope (see :func:`admission_scopes`)."""
    return any(m.objects.filter(tenant_id=tenant_id, task_id=task_id).exists() for m in _SCOPE_SOURCES)


def admission_reopen(*, tenant_id: str, task_id: str, decided_by: str, reason: str) -> AdmissionDecision:
    """Record an admin's decision, signed with the reviewer trust root, re-opening the scope.

    Args:
        decided_by: the admin's name (non-empty); reason: why (non-empty), kept with the decision.

    Raises:
        ValueError: empty ``decided_by`` or ``reason``.
        AdmissionScopeUnknownError: nothing names the scope (a misspelt tenant or task).
        KeyringError: this process cannot sign for the reviewer root.
    """
    if not decided_by.strip() or not reason.strip():
        raise ValueError("a re-open decision names who decided and why")
    if not admission_scope_known(tenant_id=tenant_id, task_id=task_id):
        raise AdmissionScopeUnknownError(tenant_id=tenant_id[:80], task_id=task_id[:80])
    decided_at = timezone.now()
    before = admission_state(tenant_id=tenant_id, task_id=task_id)
    body = {"kind": "admission.reopened", "tenant_id": tenant_id, "task_id": task_id, "decided_by": decided_by,
            "reason": reason, "decided_at": decided_at.isoformat(),
            "closed_by": {"metric": before.metric, "value": before.value, "threshold": before.threshold}}
    signature = signer_for(TrustRoot.REVIEWER).sign(canonical_json(body))
    decision = AdmissionDecision(tenant_id=tenant_id, task_id=task_id, decided_by=decided_by, reason=reason,
                                 decided_at=decided_at, body=body, key_id=signature.key_id,
                                 signature=signature.mac)
    decision.save()
    return decision


def admission_decision_verify(decision: AdmissionDecision) -> None:
    """Check a stored decision's signature over its body and that the columns match the body.

    Raises:
        UnknownKeyError / BadSignatureError: the signature does not verify.
        ValueError: the row's columns disagree with what was signed.
    """
    keyring_for(TrustRoot.REVIEWER).verify(canonical_json(decision.body),
                                           Signature(key_id=decision.key_id, mac=decision.signature))
    body = decision.body
    if (body.get("tenant_id"), body.get("task_id"), body.get("decided_by")) != (
            decision.tenant_id, decision.task_id, decision.decided_by):
        raise ValueError("the admission decision's columns differ from what was signed")
