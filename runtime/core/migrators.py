"""Checkpoint schema migrators (DESIGN.md section 3: each schema bump ships a migrator).

A migrator is a pure function from an envelope dict at version N to one at N+1. They are
registered in :data:`MIGRATORS` and chained by :func:`migrate_envelope`. A checkpoint with no
migration path raises :class:`CheckpointMigrationError`; the stored row is never dropped, so an
operator can handle it by hand.

The MAC is verified over the original bytes before migration (see
``runtime.core.checkpoint.open_envelope``); migrated output is re-validated by the caller.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from runtime.errors import CheckpointMigrationError

Migrator = Callable[[dict[str, Any]], dict[str, Any]]

MIGRATORS: dict[int, Migrator] = {}
"""``from_version -> migrator`` producing ``from_version + 1``."""


def migrator(from_version: int) -> Callable[[Migrator], Migrator]:
    """Register a migrator from ``from_version`` to ``from_version + 1``."""

    def register(fn: Migrator) -> Migrator:
        if from_version in MIGRATORS:
            raise RuntimeError(f"two migrators registered from schema v{from_version}")
        MIGRATORS[from_version] = fn
        return fn

    return register


def _usd_to_micros(value: Any, *, field: str, run_id: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CheckpointMigrationError(f"v1 field {field} is not a number", run_id=run_id)
    try:
        micros = Decimal(str(value)) * 1_000_000
    except InvalidOperation:
        raise CheckpointMigrationError(f"v1 field {field} is not a number", run_id=run_id) from None
    if micros < 0 or micros != micros.to_integral_value():
        raise CheckpointMigrationError(
            f"v1 field {field} is negative or finer than one micro-unit", run_id=run_id
        )
    return int(micros)


@migrator(1)
def v1_to_v2(body: dict[str, Any]) -> dict[str, Any]:
    """v1 -> v2.

    v1 kept cost as floating-point dollars (``limits.cost_usd``, ``usage.cost_usd``), which do not
    add up exactly; v2 keeps integer micro-units (``cost_micros``). v1 also had no replan epoch and
    no quarantined keys (review decisions arrived in v2); both start empty.
    """
    out = copy.deepcopy(body)
    run_id = out.get("run_id")
    payload = out.get("payload")
    if not isinstance(payload, dict):
        raise CheckpointMigrationError("v1 checkpoint has no payload object", run_id=run_id)
    for section in ("limits", "usage"):
        part = payload.get(section)
        if not isinstance(part, dict) or "cost_usd" not in part:
            raise CheckpointMigrationError(f"v1 payload.{section} has no cost_usd", run_id=run_id)
        part["cost_micros"] = _usd_to_micros(part.pop("cost_usd"), field=f"{section}.cost_usd", run_id=run_id)
    payload.setdefault("replan_epoch", 0)
    payload.setdefault("quarantined_keys", [])
    out["schema_version"] = 2
    return out


def migrate_envelope(body: dict[str, Any]) -> dict[str, Any]:
    """Migrate an envelope dict to the current schema version by chaining migrators.

    Raises:
        CheckpointMigrationError: version newer than this code, or no migrator for a step.
    """
    from runtime.core.checkpoint import SCHEMA_VERSION

    version = body.get("schema_version")
    run_id = body.get("run_id")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointMigrationError("checkpoint has no integer schema_version", run_id=run_id)
    if version > SCHEMA_VERSION:
        raise CheckpointMigrationError(
            f"checkpoint schema v{version} is newer than this runtime (v{SCHEMA_VERSION})",
            run_id=run_id,
        )
    while version < SCHEMA_VERSION:
        step = MIGRATORS.get(version)
        if step is None:
            raise CheckpointMigrationError(f"no migrator from schema v{version}", run_id=run_id)
        body = step(body)
        if body.get("schema_version") != version + 1:
            raise CheckpointMigrationError(f"migrator from v{version} did not produce v{version + 1}")
        version += 1
    return body
