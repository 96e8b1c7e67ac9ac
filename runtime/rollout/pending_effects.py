"""Runs with unresolved pending side effects, to check one by one before admission re-opens or
after a rollback (DESIGN.md sections 8.3 and 8.4).

A pending side effect is a write the run proposed (an ``intent.proposed`` trace event naming an
idempotency key) for which the runtime holds no receipt and which no reviewer quarantined: it
may or may not have reached the environment. Only runs in flight (not ended) are listed: an
ended run settled or abandoned its writes through the engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Q

from runtime.models import IdempotencyRecord, Phase, Run, TraceEvent

IN_FLIGHT_PHASES = (Phase.RUNNING, Phase.PENDING, Phase.AWAITING_APPROVAL, Phase.NEEDS_REVIEW)
"""Phases of a run that has not ended (a worker or a human still moves it)."""


@dataclass(frozen=True)
class PendingRun:
    """A run in flight and the idempotency keys of its proposed writes without a receipt."""

    run_id: str
    tenant_id: str
    task_id: str
    phase: str
    pending_keys: list[str]


def pending_keys_by_run(*, run_ids: Iterable[str]) -> dict[str, list[str]]:
    """``{run_id: [idempotency keys proposed, no receipt, not quarantined]}`` for each run (two
    queries); keys in proposal order, each once."""
    ids = list(run_ids)
    proposed: dict[str, list[str]] = {run_id: [] for run_id in ids}
    events = (TraceEvent.objects.filter(run_id__in=ids, event_type="intent.proposed")
              .order_by("run_id", "seq").values_list("run_id", "payload"))
    for run_id, payload in events:
        key = payload.get("idempotency_key") if isinstance(payload, dict) else None
        if key and str(key) not in proposed[run_id]:
            proposed[run_id].append(str(key))
    every = [key for keys in proposed.values() for key in keys]
    settled = set(IdempotencyRecord.objects.filter(Q(receipt__isnull=False) | Q(quarantined=True),
                                                   idempotency_key__in=every)
                  .values_list("idempotency_key", flat=True))
    return {run_id: [k for k in keys if k not in settled] for run_id, keys in proposed.items()}


def pending_runs_of_scope(*, tenant_id: str, task_id: str, limit: int = 50) -> tuple[list[PendingRun], int]:
    """The scope's runs in flight with at least one pending side effect, oldest first.

    Args:
        limit: how many runs to return at most (the banner shows them on every page).

    Returns:
        ``(runs, total)``: up to ``limit`` runs and how many such runs there are in all.
    """
    runs = list(Run.objects.filter(tenant_id=tenant_id, task_id=task_id, phase__in=IN_FLIGHT_PHASES)
                .order_by("created_at", "run_id").values_list("run_id", "phase"))
    keys = pending_keys_by_run(run_ids=[run_id for run_id, _ in runs])
    found = [PendingRun(run_id=run_id, tenant_id=tenant_id, task_id=task_id, phase=phase,
                        pending_keys=keys[run_id]) for run_id, phase in runs if keys[run_id]]
    return found[:limit], len(found)
