"""Signed evidence bundles: one JSON file that proves what happened in a run, checkable offline.

A bundle (``bundle_export``) holds, for one run:

* the run's identity and its trace head (``trace_seq``, ``trace_head``);
* the high-water mark (generation and checkpoint digest) and the committed checkpoint envelope as
  stored (RFC 8785 canonical JSON text), plus every stored checkpoint row of the run, each with
  its envelope text, digest and whether the HWM names it;
* every trace event with ``seq``, type, payload, environment version, ``created_at``,
  ``prev_hash`` and ``hash``;
* the receipts of the executed writes (from the committed checkpoint) and the review cases with
  their signed decisions and sealed evidence.

It is signed under the *checkpoint* trust root with a purpose tag of its own: the MAC covers
``canonical_json({"purpose": "ratchet-evidence-bundle/1", "bundle": <everything but
"signature">})``, so a bundle MAC can never pass as a checkpoint MAC or the reverse (the
checkpoint MAC covers the envelope without a purpose wrapper).

``bundle_verify`` needs only the checkpoint keyring (``RATCHET_CHECKPOINT_KEYS`` or the key file),
no database: it checks the bundle MAC, opens every envelope with ``open_envelope`` (checkpoint MAC,
schema, invariants), checks the committed envelope against the recorded HWM, recomputes the trace
hash chain with ``runtime.trace.event_hash`` (a pure function of the event's fields) up to the
recorded head, and re-derives every receipt fingerprint. Anything that fails is a *finding*; an
empty list means the bundle verifies (DESIGN.md sections 4 and 6: evidence an admin can hand to
someone who does not trust the dashboard).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import CheckpointEnvelope, Receipt, open_envelope
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.errors import (
    BundleExportError,
    BundleFormatError,
    RatchetError,
    WrongTrustRootError,
)

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
    """UTC ISO 8601, exactly as ``runtime.trace.event_hash`` hashes ``created_at``."""
    return value.astimezone(UTC).isoformat() if value is not None else None


def _envelope_fields(raw: bytes) -> dict[str, str]:
    # Envelopes are canonical JSON (UTF-8); a row that is not UTF-8 is corrupt but is still
    # evidence, so it travels as base64 and fails verification visibly instead of being dropped.
    try:
        return {"envelope": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"envelope_base64": base64.b64encode(raw).decode("ascii")}


def _signed_message(body: Mapping[str, Any]) -> bytes:
    return canonical_json({"purpose": BUNDLE_PURPOSE, "bundle": dict(body)})


def bundle_sign(body: Mapping[str, Any], *, keyring: Keyring) -> dict[str, Any]:
    """``body`` plus a ``signature`` ``{"purpose", "key_id", "mac"}`` under ``keyring``.

    Args:
        body: the bundle without ``signature`` (canonical-JSON serialisable).
        keyring: the checkpoint trust root's keyring (signs with its current key).

    Raises:
        WrongTrustRootError: ``keyring`` is not the checkpoint trust root's.
        CanonicalizationError: ``body`` is not canonical-JSON serialisable.
    """
    if keyring.root != TrustRoot.CHECKPOINT:
        raise WrongTrustRootError(
            "evidence bundles are signed under the checkpoint trust root", root=keyring.root.value
        )
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    signature = keyring.sign(_signed_message(unsigned))
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
        KeyringError: no checkpoint keyring is configured.
    """
    from django.db import transaction

    from runtime.checkpoints import checkpoint_hwm, checkpoint_verify
    from runtime.errors import RunNotFoundError
    from runtime.keys import keyring_for
    from runtime.models import Checkpoint, ReviewCase, Run, TraceEvent
    from runtime.trace import trace_verify

    keyring = keyring_for(TrustRoot.CHECKPOINT)
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
        "receipts": [w.model_dump(mode="json") for w in state.executed],
        "review_cases": [
            {
                **{name: getattr(case, name) for name in _CASE_FIELDS},
                "opened_at": _iso(case.opened_at),
                "decided_at": _iso(case.decided_at),
            }
            for case in cases
        ],
    }
    return bundle_sign(body, keyring=keyring)


# --- offline verification ---------------------------------------------------------------------


def bundle_load(text: str | bytes) -> dict[str, Any]:
    """Parse a bundle file's text.

    Raises:
        BundleFormatError: not JSON, or not a JSON object.
    """
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleFormatError(f"the file is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BundleFormatError("the file holds JSON but not a bundle object")
    return data


def _raw_envelope(entry: Mapping[str, Any]) -> bytes:
    if isinstance(entry.get("envelope"), str):
        return entry["envelope"].encode("utf-8")
    if isinstance(entry.get("envelope_base64"), str):
        try:
            return base64.b64decode(entry["envelope_base64"], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("envelope_base64 is not base64") from None
    raise ValueError("no envelope text")


def _check_signature(bundle: Mapping[str, Any], keyring: Keyring) -> list[str]:
    signature = bundle.get("signature")
    if not isinstance(signature, dict):
        return ["signature: missing"]
    if signature.get("purpose") != BUNDLE_PURPOSE or bundle.get("format") != BUNDLE_PURPOSE:
        return [f"signature: not a {BUNDLE_PURPOSE} bundle"]
    unsigned = {k: v for k, v in bundle.items() if k != "signature"}
    try:
        keyring.verify(
            _signed_message(unsigned),
            Signature(key_id=signature.get("key_id"), mac=signature.get("mac")),
        )
    except RatchetError as exc:
        return [f"signature: {exc.message} (key id {signature.get('key_id')!s:.64})"]
    return []


def _check_checkpoints(
    bundle: Mapping[str, Any], keyring: Keyring, run: Mapping[str, Any]
) -> tuple[list[str], CheckpointEnvelope | None]:
    findings: list[str] = []
    hwm = bundle["high_water_mark"]
    committed = bundle["committed_checkpoint"]
    opened: CheckpointEnvelope | None = None
    for entry in [*bundle["checkpoints"], committed]:
        where = (
            "committed checkpoint"
            if entry is committed
            else f"checkpoint generation {entry.get('generation')}"
        )
        try:
            raw = _raw_envelope(entry)
        except ValueError as exc:
            findings.append(f"{where}: {exc}")
            continue
        if digest_bytes(raw) != entry.get("digest"):
            findings.append(f"{where}: envelope bytes do not hash to the recorded digest")
        try:
            envelope = open_envelope(raw, keyring=keyring)
        except RatchetError as exc:
            findings.append(f"{where}: does not open: {exc.message}")
            continue
        if envelope.run_id != run.get("run_id") or envelope.generation != entry.get("generation"):
            findings.append(
                f"{where}: envelope belongs to run {envelope.run_id} generation "
                f"{envelope.generation}, not to this entry"
            )
        if entry is committed:
            opened = envelope
    if digest_bytes(_raw_or_empty(committed)) != hwm.get("checkpoint_digest"):
        findings.append("committed checkpoint: its digest is not the high-water mark's")
    if committed.get("generation") != hwm.get("generation"):
        findings.append("committed checkpoint: its generation is not the high-water mark's")
    named = [e for e in bundle["checkpoints"] if e.get("committed")]
    if len(named) != 1 or named[0].get("digest") != committed.get("digest"):
        findings.append("checkpoints: exactly one row must be the committed checkpoint")
    if opened is not None:
        ident = opened.payload.identity
        if (
            ident.scenario_fingerprint != run.get("scenario_fingerprint")
            or opened.tenant_id != run.get("tenant_id")
            or opened.task_id != run.get("task_id")
            or opened.environment_instance_id != run.get("environment_instance_id")
        ):
            findings.append("committed checkpoint: identity or scenario differs from the run's")
    return findings, opened


def _raw_or_empty(entry: Mapping[str, Any]) -> bytes:
    try:
        return _raw_envelope(entry)
    except ValueError:
        return b""


def _check_trace(bundle: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    from runtime.trace import event_hash, genesis_hash  # pure functions; no database is touched

    events = bundle["trace"]
    run_id = run.get("run_id")
    expected_prev = genesis_hash(run_id)
    for index, event in enumerate(events, start=1):
        seq = event.get("seq")
        if seq != index:
            return [f"trace: event seq {index} is missing (found seq {seq})"]
        if event.get("prev_hash") != expected_prev:
            return [f"trace: event seq {seq} does not link to the event before it"]
        created = datetime.fromisoformat(event["created_at"])
        recomputed = event_hash(
            run_id=run_id,
            seq=seq,
            event_type=event["event_type"],
            payload=event["payload"],
            environment_version=event["environment_version"],
            created_at=created,
            prev_hash=event["prev_hash"],
        )
        if recomputed != event.get("hash"):
            return [f"trace: event seq {seq} was altered after it was written"]
        expected_prev = recomputed
    if run.get("trace_seq") != len(events) or (events and run.get("trace_head") != expected_prev):
        return [
            f"trace: the chain ends at seq {len(events)} but the run's head is seq "
            f"{run.get('trace_seq')}: events were removed or added"
        ]
    return []


def _check_receipts(bundle: Mapping[str, Any], opened: CheckpointEnvelope | None) -> list[str]:
    findings = []
    for index, write in enumerate(bundle["receipts"]):
        try:
            receipt = Receipt.model_validate(write["receipt"], strict=False)
        except (ValidationError, KeyError, TypeError):
            findings.append(f"receipts[{index}]: not a receipt")
            continue
        if receipt.fingerprint() != write.get("receipt_fingerprint"):
            findings.append(
                f"receipts[{index}]: fingerprint does not match the receipt "
                f"(key {receipt.idempotency_key})"
            )
    if opened is not None:
        checkpointed = [w.model_dump(mode="json") for w in opened.payload.executed]
        if checkpointed != bundle["receipts"]:
            findings.append("receipts: differ from the executed writes of the committed checkpoint")
    for case in bundle["review_cases"]:
        if case.get("receipt"):
            try:
                receipt = Receipt.model_validate(case["receipt"], strict=False)
            except (ValidationError, TypeError):
                findings.append(f"review case {case.get('case_id')}: receipt is malformed")
                continue
            if receipt.fingerprint() != case.get("receipt_fingerprint"):
                findings.append(
                    f"review case {case.get('case_id')}: receipt fingerprint does not "
                    "match its receipt"
                )
    if opened is not None:
        refs = {ref.case_id: ref for ref in opened.payload.review_cases}
        for case in bundle["review_cases"]:
            ref = refs.get(case.get("case_id"))
            if ref is None:
                findings.append(
                    f"review case {case.get('case_id')}: not in the committed checkpoint"
                )
            elif ref.status.value != case.get("status"):
                findings.append(
                    f"review case {case.get('case_id')}: status {case.get('status')} "
                    f"but the committed checkpoint says {ref.status.value}"
                )
            elif ref.decision is not None and ref.decision.model_dump(mode="json") != case.get(
                "decision"
            ):
                findings.append(
                    f"review case {case.get('case_id')}: decision differs from the "
                    "signed one in the committed checkpoint"
                )
    return findings


def bundle_verify(bundle: Mapping[str, Any], keyring: Keyring) -> list[str]:
    """Check an evidence bundle offline; return the findings (``[]``: it verifies).

    Args:
        bundle: the parsed bundle (see :func:`bundle_load`).
        keyring: the checkpoint trust root's keyring (verifies with any key it trusts, so bundles
            signed before a key rotation still verify).

    Returns:
        One line per failed check, naming what failed (run, generation, seq, key id; never key
        material). Checks: bundle MAC and purpose; every checkpoint envelope hashes to its digest
        and opens (MAC, schema, invariants); the committed envelope is the HWM's generation and
        digest and matches the run identity; the trace chain recomputes from genesis to the run's
        recorded head; receipt fingerprints; receipts and case decisions match the committed
        checkpoint.

    Raises:
        WrongTrustRootError: ``keyring`` is not the checkpoint trust root's.
    """
    if keyring.root != TrustRoot.CHECKPOINT:
        raise WrongTrustRootError(
            "evidence bundles are verified under the checkpoint trust root", root=keyring.root.value
        )
    if not isinstance(bundle, Mapping):
        return ["bundle: not a JSON object"]
    findings = _check_signature(bundle, keyring)
    try:
        run = bundle["run"]
        if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
            return [*findings, "run: missing or malformed"]
        checkpoint_findings, opened = _check_checkpoints(bundle, keyring, run)
        findings += checkpoint_findings
        findings += _check_trace(bundle, run)
        findings += _check_receipts(bundle, opened)
    except (KeyError, TypeError, ValueError, AttributeError, RatchetError) as exc:
        # A mangled bundle must produce a finding, never a traceback.
        findings.append(f"bundle: malformed ({type(exc).__name__}: {str(exc)[:200]})")
    return findings
