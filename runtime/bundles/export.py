"""Signed evidence bundles: one JSON file that proves what happened in a run, checkable offline.

A bundle (``bundle_export``) holds, for one run:

* the run's identity and its trace head (``trace_seq``, ``trace_head``);
* the high-water mark (generation and checkpoint digest) and the committed checkpoint envelope as
  stored (RFC 8785 canonical JSON text), plus every stored checkpoint row of the run, each with
  its envelope text, digest and whether the HWM names it;
* every trace event with ``seq``, type, payload, environment version, ``created_at``,
  ``prev_hash`` and ``hash``;
* the receipts of the executed writes (from the committed checkpoint) and the review cases with
  their signed decisions and sealed evidence;
* the run's rollout log (``runtime.rollout.rollout_log``, DESIGN.md sections 8.3 and 8.4): admission
  closings, signed re-opens and threshold changes of its scope, and its combination's history.

It is signed (Ed25519) under the *export* trust root with a purpose tag of its own: the
signature covers ``canonical_json({"purpose": "ratchet-evidence-bundle/1", "bundle": <everything
but "signature">})``, so it can never pass as any other signature.

Offline verification, which needs only public keys (export, approval, reviewer), is
``runtime.bundles.verification`` (DESIGN.md section 4.8: evidence an admin can hand to someone who
does not trust the dashboard and holds no secret).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.ledger import state_ledger
from runtime.core.signing import Keyring, TrustRoot
from runtime.errors import BundleExportError, WrongTrustRootError

BUNDLE_PURPOSE = "ratchet-evidence-bundle/1"
"""Purpose tag bound into the bundle MAC and written as the bundle's ``format``."""

_RUN_FIELDS = (
    "run_id",
    "tenant_id",
    "task_id",
    "task_version",
    "policy_id",
    "policy_version",
    "environment_instance_id",
    "scenario_fingerprint",
    "phase",
    "stop_reason",
    "generation",
    "trace_seq",
    "trace_head",
)
_CASE_FIELDS = (
    "case_id",
    "status",
    "reason",
    "detail",
    "idempotency_key",
    "pending",
    "receipt",
    "receipt_fingerprint",
    "environment",
    "observed",
    "trace_excerpt",
    "sealed",
    "decision",
    "decided_by",
)


def _iso(value: datetime | None) -> str | None:
    """UTC ISO 8601, exactly as ``runtime.evidence.trace.event_hash`` hashes ``created_at``."""
    return value.astimezone(UTC).isoformat() if value is not None else None


def _envelope_fields(raw: bytes) -> dict[str, str]:
    # Envelopes are canonical JSON (UTF-8); a row that is not UTF-8 is corrupt but is still
    # evidence, so it travels as base64 and fails verification visibly instead of being dropped.
    try:
        return {"envelope": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"envelope_base64": base64.b64encode(raw).decode("ascii")}


def bundle_signed_message(body: Mapping[str, Any]) -> bytes:
    """The bytes a bundle MAC covers: ``body`` (without ``signature``) under the purpose tag.

    Raises:
        CanonicalizationError: ``body`` is not canonical-JSON serialisable.
    """
    return canonical_json({"purpose": BUNDLE_PURPOSE, "bundle": dict(body)})


def bundle_sign(body: Mapping[str, Any], *, keyring: Keyring) -> dict[str, Any]:
    """``body`` plus a ``signature`` ``{"purpose", "key_id", "mac"}`` under ``keyring``
    (``mac`` holds the Ed25519 signature, 128 hex characters).

    Args:
        body: the bundle without ``signature`` (canonical-JSON serialisable).
        keyring: the export trust root's private keyring (signs with its current key).

    Raises:
        WrongTrustRootError: ``keyring`` is not the export trust root's.
        KeyringError: ``keyring`` holds only public keys.
        CanonicalizationError: ``body`` is not canonical-JSON serialisable.
    """
    if keyring.root != TrustRoot.EXPORT:
        raise WrongTrustRootError(
            "evidence bundles are signed under the export trust root", root=keyring.root.value
        )
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    signature = keyring.sign(bundle_signed_message(unsigned))
    return {
        **unsigned,
        "signature": {"purpose": BUNDLE_PURPOSE, "key_id": signature.key_id, "mac": signature.mac},
    }


def bundle_export(*, run_id: str, exported_by: str = "") -> dict[str, Any]:
    """Collect and sign the evidence bundle of ``run_id`` (a JSON-ready dict).

    The run row is locked while the snapshot is read, so a worker's commit (which updates the run
    row before it moves the HWM) cannot land halfway through: HWM, checkpoints and trace belong
    together. The committed checkpoint and the trace chain are verified first; a run whose
    evidence does not verify gets no signed bundle.

    Args:
        run_id: the run.
        exported_by: who asked for the bundle (recorded in it; not an authorisation).

    Raises:
        RunNotFoundError: no such run.
        BundleExportError: the trace hash chain is broken.
        CheckpointError subclasses / SigningError: the committed checkpoint fails to verify
            (as ``checkpoint_verify`` raises them).
        KeyringError: this process holds no private export key.
    """
    from django.db import transaction

    from runtime.checkpoints.ledger import ledger_entries
    from runtime.checkpoints.protocol import checkpoint_hwm, checkpoint_verify
    from runtime.errors import RunNotFoundError
    from runtime.evidence.trace import trace_verify
    from runtime.keys import signer_for
    from runtime.models import Checkpoint, ReviewCase, Run, TraceEvent
    from runtime.rollout.rollout_log import rollout_log

    keyring = signer_for(TrustRoot.EXPORT)
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(run_id=run_id).first()
        if run is None:
            raise RunNotFoundError(run_id=run_id)
        chain = trace_verify(run_id=run_id)
        if not chain.ok:
            raise BundleExportError(
                f"the trace hash chain does not verify: {chain.reason}",
                run_id=run_id,
                seq=chain.first_bad_seq,
            )
        restored = checkpoint_verify(run_id=run_id)
        hwm = checkpoint_hwm(run_id=run_id)
        rows = list(Checkpoint.objects.filter(run_id=run_id).order_by("generation", "id"))
        events = list(TraceEvent.objects.filter(run_id=run_id).order_by("seq"))
        cases = list(ReviewCase.objects.filter(run_id=run_id).order_by("opened_at", "case_id"))
        rollout = rollout_log(run=run)

    checkpoints = []
    committed: dict[str, Any] | None = None
    for row in rows:
        raw = bytes(row.envelope)
        entry = {
            "generation": row.generation,
            "digest": row.digest,
            "key_id": row.key_id,
            "schema_version": row.schema_version,
            "lease_version": row.lease_version,
            "created_at": _iso(row.created_at),
            "committed": row.generation == hwm.generation and digest_bytes(raw) == hwm.digest,
            **_envelope_fields(raw),
        }
        checkpoints.append(entry)
        if entry["committed"] and committed is None:
            committed = {k: entry[k] for k in ("generation", "digest", "key_id")}
            committed.update(_envelope_fields(raw))
    if committed is None:  # checkpoint_verify passed, so only a concurrent rewrite gets here
        raise BundleExportError(
            "the committed checkpoint vanished while the bundle was read",
            run_id=run_id,
            generation=hwm.generation,
        )
    state = restored.state
    body: dict[str, Any] = {
        "format": BUNDLE_PURPOSE,
        "exported_at": _iso(datetime.now(UTC)),
        "exported_by": exported_by,
        "run": {name: getattr(run, name) for name in _RUN_FIELDS},
        "high_water_mark": {"generation": hwm.generation, "checkpoint_digest": hwm.digest},
        "committed_checkpoint": committed,
        "checkpoints": checkpoints,
        "trace": [
            {
                "seq": e.seq,
                "event_type": e.event_type,
                "payload": e.payload,
                "environment_version": e.environment_version,
                "created_at": _iso(e.created_at),
                "prev_hash": e.prev_hash,
                "hash": e.hash,
            }
            for e in events
        ],
        "receipts": [w.model_dump(mode="json") for w in state_ledger(state).executed_writes()],
        "ledger": [
            {"seq": e.seq, "kind": e.kind.value, "key": e.key, "body": e.body.decode("utf-8"),
             "prev_hash": e.prev_hash, "entry_hash": e.entry_hash}
            for e in ledger_entries(run_id=run_id, head=state.ledger)
        ],
        "review_cases": [
            {
                **{name: getattr(case, name) for name in _CASE_FIELDS},
                "opened_at": _iso(case.opened_at),
                "decided_at": _iso(case.decided_at),
            }
            for case in cases
        ],
        "rollout": rollout,
    }
    return bundle_sign(body, keyring=keyring)
