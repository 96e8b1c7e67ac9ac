"""Checkpoint schema migrators (DESIGN.md section 3: each schema bump ships a migrator).

A migrator is a pure function from an envelope dict at version N to one at N+1. They are
registered in :data:`MIGRATORS` and chained by :func:`migrate_envelope`. A checkpoint with no
migration path raises :class:`CheckpointMigrationError`; the stored row is never dropped, so an
operator can handle it by hand.

The MAC is verified over the original bytes before migration (see
``runtime.core.envelope.open_envelope``); migrated output is re-validated by the caller, and a
migrated checkpoint that is not valid at the current version is a migration error too. Each
migrator must produce *every* field of its target version: stored checkpoints are complete.

History:
    v1 -> v2  cost as integer micro-units instead of float dollars; replan epochs and
              quarantined keys (reviewer ``replan`` decisions) arrive.
    v2 -> v3  executed writes, consumed nonces and quarantined keys leave the payload for the
              receipts ledger (DESIGN.md section 3.1): the payload gets an empty ``ledger`` head
              and the lists travel beside it as ``carried_ledger``, which ``open_envelope``
              stages so the next commit writes them as ledger entries.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from runtime.core.checkpoint import SCHEMA_VERSION
from runtime.core.nesting import MAX_NESTING_DEPTH, value_depth
from runtime.errors import CheckpointMigrationError

Migrator = Callable[[dict[str, Any]], dict[str, Any]]

MIGRATORS: dict[int, Migrator] = {}
"""``from_version -> migrator`` producing ``from_version + 1``."""


def migrator(from_version: int) -> Callable[[Migrator], Migrator]:
    """Register a migrator from ``from_version`` to ``from_version + 1``.

    Raises:
        CheckpointMigrationError: a migrator from that version is already registered (two
            would make the chain ambiguous); raised at import time.
    """

    def register(fn: Migrator) -> Migrator:
        if from_version in MIGRATORS:
            raise CheckpointMigrationError(
                f"two migrators registered from schema v{from_version}", schema_version=from_version
            )
        MIGRATORS[from_version] = fn
        return fn

    return register


def _usd_to_micros(value: Any, *, field: str, run_id: Any) -> int:
    """Exact conversion of v1 float dollars to integer micro-units, or a migration error.

    ``Decimal(repr(float))`` is the shortest decimal that round-trips the float, i.e. what the
    v1 writer meant (0.1 -> 100000, not 100000.0000000000055...). A value finer than one
    micro-unit cannot be represented in v2 and is refused rather than rounded: rounding money
    silently is exactly what the migration exists to stop.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CheckpointMigrationError(f"v1 field {field} is not a number", run_id=run_id)
    if isinstance(value, float) and not math.isfinite(value):
        raise CheckpointMigrationError(f"v1 field {field} is not finite", run_id=run_id)
    micros = Decimal(repr(value)) * 1_000_000
    if micros < 0 or micros != micros.to_integral_value():
        raise CheckpointMigrationError(
            f"v1 field {field} is negative or finer than one micro-unit", run_id=run_id
        )
    return int(micros)


@migrator(1)
def v1_to_v2(body: dict[str, Any]) -> dict[str, Any]:
    """v1 -> v2.

    v1 kept cost as floating-point dollars (``limits.cost_usd``, ``usage.cost_usd``), which do not
    add up exactly; v2 keeps integer micro-units (``cost_micros``). v1 also had no replan epoch
    (neither on the run nor on its pending action) and no quarantined keys (review decisions
    arrived in v2); they start at epoch 0 and empty. A v1 body that already has any of the v2
    fields is not a v1 body and is refused.

    Raises:
        CheckpointMigrationError: no payload, a missing or unconvertible ``cost_usd``, or v2
            fields already present.
    """
    out = copy.deepcopy(body)
    run_id = out.get("run_id")
    payload = out.get("payload")
    if not isinstance(payload, dict):
        raise CheckpointMigrationError("v1 checkpoint has no payload object", run_id=run_id)
    pending = payload.get("pending")
    if pending is not None and not isinstance(pending, dict):
        raise CheckpointMigrationError("v1 payload.pending is not an object", run_id=run_id)
    v2_only = [f"payload.{k}" for k in ("replan_epoch", "quarantined_keys") if k in payload]
    if pending is not None and "replan_epoch" in pending:
        v2_only.append("payload.pending.replan_epoch")
    for section in ("limits", "usage"):
        part = payload.get(section)
        if not isinstance(part, dict) or "cost_usd" not in part:
            raise CheckpointMigrationError(f"v1 payload.{section} has no cost_usd", run_id=run_id)
        if "cost_micros" in part:
            v2_only.append(f"payload.{section}.cost_micros")
    if v2_only:
        raise CheckpointMigrationError(
            "checkpoint says schema v1 but has v2 fields: " + ", ".join(v2_only), run_id=run_id
        )
    for section in ("limits", "usage"):
        part = payload[section]
        part["cost_micros"] = _usd_to_micros(
            part.pop("cost_usd"), field=f"{section}.cost_usd", run_id=run_id
        )
    payload["replan_epoch"] = 0
    payload["quarantined_keys"] = []
    if pending is not None:
        pending["replan_epoch"] = 0
    for case in payload.get("review_cases") or []:
        if isinstance(case, dict):
            case.setdefault("decision", None)  # v1 review cases could not carry signed decisions
    out["schema_version"] = 2
    return out


CARRIED_LEDGER = "carried_ledger"
"""Key of the lists a v2 -> v3 migration moved out of the payload (never in a stored envelope)."""


@migrator(2)
def _v2_to_v3(body: dict[str, Any]) -> dict[str, Any]:
    """v2 -> v3: the growing lists leave the payload for the receipts ledger.

    ``executed``, ``consumed_nonces`` and ``quarantined_keys`` move to ``body["carried_ledger"]``
    unchanged (``open_envelope`` validates them as ledger entries); the payload commits to an
    empty ledger, because a v2 run has no ledger rows yet.

    Raises:
        CheckpointMigrationError: no payload, a missing list, or a v3 ``ledger`` already present.
    """
    out = copy.deepcopy(body)
    run_id = out.get("run_id")
    payload = out.get("payload")
    if not isinstance(payload, dict):
        raise CheckpointMigrationError("v2 checkpoint has no payload object", run_id=run_id)
    if "ledger" in payload:
        raise CheckpointMigrationError("checkpoint says schema v2 but has payload.ledger",
                                       run_id=run_id)
    carried = {}
    for name in ("executed", "consumed_nonces", "quarantined_keys"):
        if not isinstance(payload.get(name), list):
            raise CheckpointMigrationError(f"v2 payload.{name} is missing or not a list",
                                           run_id=run_id)
        carried[name] = payload.pop(name)
    payload["ledger"] = {"length": 0, "head": None}
    out[CARRIED_LEDGER] = carried
    out["schema_version"] = 3
    return out


def migrate_envelope(body: dict[str, Any]) -> dict[str, Any]:
    """Migrate an envelope dict to the current schema version by chaining migrators.

    Args:
        body: the parsed envelope (its MAC already verified); it is not modified.

    Returns:
        A new envelope dict at the current schema version (its ``mac`` is the original one, over
        the original bytes; callers must not re-verify it against the migrated body).

    Raises:
        CheckpointMigrationError: version newer than this code, no migrator for a step, a
            migrator that failed or produced the wrong version, or a body nested deeper than
            ``MAX_NESTING_DEPTH`` (the migrators copy it recursively; DESIGN.md section 2.2).
            The error names the run id, generation and the version the checkpoint was stored at.
    """
    if not isinstance(body, dict):
        raise CheckpointMigrationError("checkpoint is not a JSON object")
    version = body.get("schema_version")
    ids = {
        "run_id": body.get("run_id") if isinstance(body.get("run_id"), str) else None,
        "generation": body.get("generation") if type(body.get("generation")) is int else None,
        "schema_version": version if type(version) is int else None,
    }
    if type(version) is not int:
        raise CheckpointMigrationError("checkpoint has no integer schema_version", **ids)
    if value_depth(body) > MAX_NESTING_DEPTH:
        raise CheckpointMigrationError(
            f"checkpoint nests more than {MAX_NESTING_DEPTH} levels deep", **ids)
    if version > SCHEMA_VERSION:
        raise CheckpointMigrationError(
            f"checkpoint schema v{version} is newer than this runtime (v{SCHEMA_VERSION})", **ids
        )
    while version < SCHEMA_VERSION:
        step = MIGRATORS.get(version)
        if step is None:
            raise CheckpointMigrationError(f"no migrator from schema v{version}", **ids)
        try:
            body = step(body)
        except CheckpointMigrationError as exc:
            known = {k: v for k, v in ids.items() if v is not None}
            raise CheckpointMigrationError(exc.message, **{**exc.context, **known}) from None
        except Exception as exc:
            # A buggy migrator (KeyError on an odd v1 body, a canonicalisation error...) must
            # still fail typed and closed, so the checkpoint goes to manual handling.
            raise CheckpointMigrationError(
                f"migrator from v{version} failed with {type(exc).__name__}", **ids
            ) from None
        if not isinstance(body, dict) or body.get("schema_version") != version + 1:
            raise CheckpointMigrationError(
                f"migrator from v{version} did not produce v{version + 1}", **ids
            )
        version += 1
    return body
