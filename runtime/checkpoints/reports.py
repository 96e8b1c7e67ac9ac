"""Per-row checkpoint reports for the ``checkpoint show`` command and the run pages.

A report lists every stored checkpoint row of a run, orphans included, each verified on its own
and marked when the high-water mark names it (DESIGN.md section 4). A bad row is reported, never
raised: this is the forensic view of a run whose checkpoints may be damaged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runtime.checkpoints.checks import run_load, stored_envelope_open
from runtime.checkpoints.high_water_marks import HighWaterMarkInfo
from runtime.checkpoints.mark_completion import hwm_for_display
from runtime.core.canonical import digest_bytes
from runtime.core.signing import TrustRoot
from runtime.errors import RatchetError
from runtime.keys import keyring_for
from runtime.models import Checkpoint


@dataclass(frozen=True)
class CheckpointReport:
    """One stored checkpoint row as the ``checkpoint`` management command shows it.

    Attributes:
        generation, digest, key_id, schema_version, lease_version: the row's columns.
        created_at: when the row was written (database clock).
        committed: the HWM names this row (same generation and the bytes hash to its digest).
        status: ``"valid"`` or the text of the error that verification raised.
        envelope: the stored JSON (for display), or ``None`` when the bytes are not JSON.
    """

    generation: int
    digest: str
    key_id: str
    schema_version: int
    lease_version: int
    created_at: datetime
    committed: bool
    status: str
    envelope: dict[str, Any] | None


def checkpoint_inspect(*, run_id: str, generation: int | None = None) -> list[CheckpointReport]:
    """Every stored checkpoint row of a run (or of one generation), verified one by one.

    Never raises for a bad row: its ``status`` carries the error text. Key material is never
    part of a report.

    Raises:
        RunNotFoundError: no such run.
    """
    run = run_load(run_id=run_id)
    hwm: HighWaterMarkInfo | None = hwm_for_display(run=run)
    try:
        keyring = keyring_for(TrustRoot.CHECKPOINT)
        keyring_error = ""
    except RatchetError as exc:
        keyring, keyring_error = None, str(exc)
    rows = Checkpoint.objects.filter(run_id=run_id)
    if generation is not None:
        rows = rows.filter(generation=generation)
    reports = []
    for row in rows.order_by("generation", "id"):
        raw = bytes(row.envelope)
        actual = digest_bytes(raw)
        committed = hwm is not None and hwm.generation == row.generation and hwm.digest == actual
        if keyring is None:
            status = keyring_error
        else:
            try:
                stored_envelope_open(
                    raw=raw, run_id=run_id, generation=row.generation, keyring=keyring
                )
            except RatchetError as exc:
                status = str(exc)
            else:
                status = (
                    "valid"
                    if actual == row.digest
                    else "stored bytes do not match the row's digest"
                )
        try:
            shown = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            shown = None
        reports.append(
            CheckpointReport(
                generation=row.generation,
                digest=row.digest,
                key_id=row.key_id,
                schema_version=row.schema_version,
                lease_version=row.lease_version,
                created_at=row.created_at,
                committed=committed,
                status=status,
                envelope=shown if isinstance(shown, dict) else None,
            )
        )
    return reports
