"""The admission gate's thresholds: defaults, settings, and overrides admins edit in the dashboard
with an audit trail (DESIGN.md section 8.3).

Resolution, last one wins: the defaults (``RATCHET_ADMISSION_*`` settings), then
``RATCHET_ADMISSION_THRESHOLDS`` for ``*``, ``tenant/*``, ``tenant/task``, then the database
overrides (``AdmissionThreshold``) for the same three scopes. So an admin's override beats any
setting, and a narrower scope beats a wider one within each layer. Every change of an override
appends an ``AdmissionThresholdChange`` row (who, when, old, new, why) in the same transaction.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runtime.errors import AdmissionThresholdError, ConfigurationError
from runtime.models import AdmissionThreshold, AdmissionThresholdChange

NAMES = ("min_success_rate", "min_recoveries", "max_p95_seconds", "max_duplicates", "window_seconds")
"""The thresholds, in the order pages show them."""
LABELS = {
    "min_success_rate": "Minimum recovery success rate (0..1)",
    "min_recoveries": "Recoveries needed before the rate and p95 count",
    "max_p95_seconds": "Maximum p95 recovery duration (seconds)",
    "max_duplicates": "Maximum duplicate submissions",
    "window_seconds": "Sliding window (seconds)",
}
_WHOLE = ("min_recoveries", "max_duplicates")
WILDCARD = "*"


@dataclass(frozen=True)
class Thresholds:
    """One scope's thresholds (rates in [0, 1], durations and the window in seconds)."""

    min_success_rate: float
    min_recoveries: int
    max_p95_seconds: float
    max_duplicates: int
    window_seconds: float


@dataclass(frozen=True)
class ThresholdValue:
    """One effective threshold and where it came from (``source``: ``default``, ``setting
    SCOPE`` or ``override SCOPE``, SCOPE like ``acme/*``)."""

    name: str
    label: str
    value: float
    source: str


def _scopes(tenant_id: str, task_id: str) -> list[tuple[str, str]]:
    if tenant_id == WILDCARD:
        return [(WILDCARD, WILDCARD)]
    if task_id == WILDCARD:
        return [(WILDCARD, WILDCARD), (tenant_id, WILDCARD)]
    return [(WILDCARD, WILDCARD), (tenant_id, WILDCARD), (tenant_id, task_id)]


def _settings_key(tenant_id: str, task_id: str) -> str:
    return WILDCARD if tenant_id == WILDCARD else f"{tenant_id}/{task_id}"


def admission_thresholds_explained(*, tenant_id: str, task_id: str) -> list[ThresholdValue]:
    """Each threshold of a scope with its source, in :data:`NAMES` order (one query).

    Args:
        tenant_id / task_id: the scope; ``task_id`` ``"*"`` is the tenant-wide scope and
            ``tenant_id`` ``"*"`` the global one.

    Raises:
        ConfigurationError: ``RATCHET_ADMISSION_THRESHOLDS`` is not a JSON object of known names.
    """
    values: dict[str, tuple[float, str]] = {
        "min_success_rate": (settings.RATCHET_ADMISSION_MIN_SUCCESS_RATE, "default"),
        "min_recoveries": (settings.RATCHET_ADMISSION_MIN_RECOVERIES, "default"),
        "max_p95_seconds": (settings.RATCHET_ADMISSION_MAX_P95_SECONDS, "default"),
        "max_duplicates": (settings.RATCHET_ADMISSION_MAX_DUPLICATES, "default"),
        "window_seconds": (settings.RATCHET_ADMISSION_WINDOW_SECONDS, "default")}
    scopes = _scopes(tenant_id, task_id)
    raw = settings.RATCHET_ADMISSION_THRESHOLDS
    try:
        configured = json.loads(raw) if raw else {}
        for scope in dict.fromkeys(_settings_key(*s) for s in scopes):
            for name, value in dict(configured.get(scope, {})).items():
                if name not in NAMES:
                    raise ValueError(f"unknown threshold {name!r}")
                values[name] = (float(value), f"setting {scope}")
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigurationError(f"RATCHET_ADMISSION_THRESHOLDS is invalid: {exc}") from None
    wanted = Q()
    for tenant, task in scopes:
        wanted |= Q(tenant_id=tenant, task_id=task)
    rank = {scope: i for i, scope in enumerate(scopes)}
    rows = sorted(AdmissionThreshold.objects.filter(wanted, name__in=NAMES)
                  .values_list("tenant_id", "task_id", "name", "value"), key=lambda r: rank[(r[0], r[1])])
    for tenant, task, name, value in rows:
        values[name] = (float(value), f"override {tenant}/{task}")
    return [ThresholdValue(name=n, label=LABELS[n], value=float(values[n][0]), source=values[n][1]) for n in NAMES]


def admission_thresholds(*, tenant_id: str, task_id: str) -> Thresholds:
    """The effective thresholds of a scope (DESIGN.md section 8.3): overrides > settings > defaults.

    Raises:
        ConfigurationError: ``RATCHET_ADMISSION_THRESHOLDS`` is invalid.
    """
    v = {t.name: t.value for t in admission_thresholds_explained(tenant_id=tenant_id, task_id=task_id)}
    return Thresholds(min_success_rate=float(v["min_success_rate"]), min_recoveries=int(v["min_recoveries"]),
                      max_p95_seconds=float(v["max_p95_seconds"]), max_duplicates=int(v["max_duplicates"]),
                      window_seconds=float(v["window_seconds"]))


def _checked_value(*, name: str, value: float | None, context: dict[str, str]) -> float | None:
    if name not in NAMES:
        raise AdmissionThresholdError(f"unknown threshold {name[:40]!r}; known: {', '.join(NAMES)}", **context)
    if value is None:
        return None
    if not math.isfinite(value):
        raise AdmissionThresholdError(f"{name} must be a finite number", **context)
    if name == "min_success_rate" and not 0.0 <= value <= 1.0:
        raise AdmissionThresholdError(f"{name} is a rate between 0 and 1, not {value:g}", **context)
    if name in _WHOLE and (value != int(value) or value < (1 if name == "min_recoveries" else 0)):
        floor = 1 if name == "min_recoveries" else 0
        raise AdmissionThresholdError(f"{name} is a whole number of at least {floor}, not {value:g}", **context)
    if name in ("max_p95_seconds", "window_seconds") and value <= 0:
        raise AdmissionThresholdError(f"{name} is a number of seconds above 0, not {value:g}", **context)
    return float(value)


def admission_threshold_set(*, tenant_id: str, task_id: str, name: str, value: float | None, changed_by: str,
                            reason: str) -> AdmissionThresholdChange:
    """Set (or, with ``value`` None, remove) one threshold override and append its audit row.

    Args:
        tenant_id / task_id: the scope (``"*"`` wildcards as in :func:`admission_thresholds_explained`;
            a global scope is ``"*"`` / ``"*"``); name: one of :data:`NAMES`; value: rates 0..1,
            counts whole >= 0 (``min_recoveries`` >= 1), seconds > 0; changed_by: the admin's
            user name; reason: why (both non-empty).

    Returns:
        The audit row (``old_value`` None: there was no override; ``new_value`` None: removed).

    Raises:
        AdmissionThresholdError: unknown name, value out of range, empty scope, changer or reason.
    """
    context = {"tenant_id": tenant_id[:80], "task_id": task_id[:80], "name": name[:40]}
    if not tenant_id.strip() or not task_id.strip() or (tenant_id == WILDCARD and task_id != WILDCARD):
        raise AdmissionThresholdError("a scope is tenant/task, tenant/* or */*", **context)
    if not changed_by.strip() or not reason.strip():
        raise AdmissionThresholdError("a threshold change names who made it and why", **context)
    checked = _checked_value(name=name, value=value, context=context)
    now = timezone.now()
    with transaction.atomic():
        row = (AdmissionThreshold.objects.select_for_update()
               .filter(tenant_id=tenant_id, task_id=task_id, name=name).first())
        old = row.value if row is not None else None
        if checked is None:
            if row is not None:
                row.delete()
        elif row is None:
            AdmissionThreshold.objects.create(tenant_id=tenant_id, task_id=task_id, name=name, value=checked,
                                              changed_by=changed_by, changed_at=now)
        else:
            AdmissionThreshold.objects.filter(pk=row.pk).update(value=checked, changed_by=changed_by, changed_at=now)
        change = AdmissionThresholdChange(tenant_id=tenant_id, task_id=task_id, name=name, old_value=old,
                                          new_value=checked, changed_by=changed_by, changed_at=now, reason=reason)
        change.save()
    return change


def admission_threshold_changes(*, tenant_id: str, task_id: str, limit: int = 100) -> list[AdmissionThresholdChange]:
    """The audit rows of exactly this scope, newest first (at most ``limit``)."""
    return list(AdmissionThresholdChange.objects.filter(tenant_id=tenant_id, task_id=task_id)
                .order_by("-changed_at", "-id")[:limit])
