"""The runs list's verdict on each row's committed checkpoint, for a whole page in two queries.

The run detail page asks ``checkpoint_verify`` (four queries per run); a list cannot afford that
per row, so this re-checks the committed envelope in bulk: MAC, schema, HWM generation and
digest, identity and scenario fingerprint (DESIGN.md section 4).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import reduce
from typing import Any

from django.db import OperationalError, ProgrammingError
from django.db.models import Q

from runtime.checkpoints.high_water_marks import HighWaterMarkInfo
from runtime.checkpoints.mark_completion import hwm_for_display
from runtime.core.canonical import digest_bytes
from runtime.core.envelope import open_envelope
from runtime.core.signing import TrustRoot
from runtime.database.routers import hwm_alias
from runtime.errors import RatchetError, SigningError
from runtime.keys import keyring_for
from runtime.models import Checkpoint, HighWaterMark, Run


@dataclass(frozen=True)
class CheckpointStatus:
    """Verdict on a run's committed checkpoint, for display.

    Attributes:
        tone: ``"ok"``, ``"bad"`` (fails closed: a resume would refuse) or ``"neutral"``.
        label: a short badge text, e.g. ``"verified"``, ``"signature invalid"``.
        detail: the error text (identifiers only, never key material), or ``""``.
    """

    tone: str
    label: str
    detail: str = ""


def committed_statuses(*, runs: list[Run]) -> dict[str, tuple[int | None, CheckpointStatus]]:
    """HWM generation and committed-checkpoint verdict of each run, in two queries in total.

    Returns:
        run id -> ``(generation, status)``; the generation is ``None`` when the run's HWM row
        is missing or the HWM store cannot be read (then every status says so).
    """
    if not runs:
        return {}
    keyring_error = ""
    try:
        keyring = keyring_for(TrustRoot.CHECKPOINT)
    except RatchetError as exc:
        keyring, keyring_error = None, str(exc)
    try:
        hwms = {
            (h["task_id"], h["run_id"], h["environment_instance_id"]): (
                h["generation"],
                h["checkpoint_digest"],
            )
            for h in HighWaterMark.objects.using(hwm_alias())
            .filter(run_id__in=[r.run_id for r in runs])
            .values(
                "task_id", "run_id", "environment_instance_id", "generation", "checkpoint_digest"
            )
        }
    except (OperationalError, ProgrammingError) as exc:
        down = CheckpointStatus("bad", "HWM store unavailable", type(exc).__name__)
        return {r.run_id: (None, down) for r in runs}

    for run in runs:
        scope = (run.task_id, run.run_id, run.environment_instance_id)
        found = hwms.get(scope)
        if found is not None and run.generation > found[0]:
            # The mark lags its run row (its writer stopped after the commit point): complete
            # it as a restore would (DESIGN.md section 4.3), or show it as stored.
            shown = hwm_for_display(run=run, stored=HighWaterMarkInfo(*found))
            hwms[scope] = (shown.generation, shown.digest) if shown is not None else found

    wanted = {}
    for run in runs:
        hwm = hwms.get((run.task_id, run.run_id, run.environment_instance_id))
        if hwm is not None and hwm[0] > 0 and run.archived_at is None:
            wanted[run.run_id] = hwm[0]
    envelopes: dict[str, list[bytes]] = {}
    if wanted:
        pairs = reduce(operator.or_, (Q(run_id=rid, generation=gen) for rid, gen in wanted.items()))
        for run_id, raw in (
            Checkpoint.objects.filter(pairs).order_by("id").values_list("run_id", "envelope")
        ):
            envelopes.setdefault(run_id, []).append(bytes(raw))

    result: dict[str, tuple[int | None, CheckpointStatus]] = {}
    for run in runs:
        hwm = hwms.get((run.task_id, run.run_id, run.environment_instance_id))
        if run.archived_at is not None:
            # Its envelopes left with the archive (DESIGN.md section 4.11): the bundle, checked
            # by its recorded digest, is what verifies it now.
            result[run.run_id] = (hwm[0] if hwm is not None else None,
                                  CheckpointStatus("neutral", "archived", run.archive_location))
            continue
        if hwm is None:
            result[run.run_id] = (
                None,
                CheckpointStatus("bad", "HWM missing", "no high-water mark row"),
            )
            continue
        generation, hwm_digest = hwm
        if generation == 0:
            result[run.run_id] = (0, CheckpointStatus("neutral", "none yet"))
        elif keyring is None:
            result[run.run_id] = (
                generation,
                CheckpointStatus("bad", "keyring unavailable", keyring_error),
            )
        else:
            status = _verdict(run, generation, hwm_digest, envelopes.get(run.run_id, []), keyring)
            result[run.run_id] = (generation, status)
    return result


def _verdict(
    run: Run, generation: int, hwm_digest: str, candidates: list[bytes], keyring: Any
) -> CheckpointStatus:
    if not candidates:
        return CheckpointStatus(
            "bad", "missing", f"no stored checkpoint at generation {generation}"
        )
    raw = next((c for c in candidates if digest_bytes(c) == hwm_digest), None)
    if raw is None:
        return CheckpointStatus(
            "bad",
            "bytes altered",
            f"no checkpoint at generation {generation} hashes to the HWM's digest",
        )
    try:
        envelope = open_envelope(raw, keyring=keyring)
    except SigningError as exc:
        return CheckpointStatus("bad", "signature invalid", str(exc))
    except RatchetError as exc:
        return CheckpointStatus("bad", "invalid", str(exc))
    identity = envelope.payload.identity
    if (
        envelope.run_id != run.run_id
        or envelope.tenant_id != run.tenant_id
        or envelope.task_id != run.task_id
        or envelope.environment_instance_id != run.environment_instance_id
        or envelope.generation != generation
    ):
        return CheckpointStatus(
            "bad", "identity mismatch", "the envelope belongs to another run or generation"
        )
    if identity.scenario_fingerprint != run.scenario_fingerprint:
        return CheckpointStatus(
            "bad", "scenario mismatch", "scenario fingerprint differs from the run's"
        )
    return CheckpointStatus("ok", "verified")
