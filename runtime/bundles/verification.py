"""Offline verification of a signed evidence bundle (DESIGN.md section 4.8).

``bundle_verify`` needs only public keys (:class:`BundleTrust`: the export, approval and reviewer
roots' public keys, from the configuration or a public-key file an auditor was handed), no
database and no secret: it checks the export signature, parses every checkpoint envelope and
checks its digest, schema and invariants (and its HMAC too when the verifier also holds the
checkpoint key), checks the committed envelope against the recorded HWM, verifies every approval,
denial and reviewer decision inside every checkpoint, ledger, case and trace event with the public keys,
recomputes the trace hash chain with ``runtime.evidence.trace.event_hash`` up to the recorded head, checks
that the trace's times never go backwards, and re-derives every receipt fingerprint. Anything that
fails is a *finding*; an empty list means the bundle verifies. The format is ``runtime.bundles.export``.

Over 400 lines: each check is short, and they share the one bundle walk.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runtime.bundles.export import BUNDLE_PURPOSE, bundle_signed_message
from runtime.core.amendment import AMENDED_EVENT, amendment_findings
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import SCHEMA_VERSION, ApprovalEvidence, LedgerHead, Receipt, SignedDecision
from runtime.core.denial_evidence import denial_problem
from runtime.core.derived_rows import ROW_ONLY_CASE_REASONS, run_row_disagreement
from runtime.core.envelope import CheckpointEnvelope, open_envelope
from runtime.core.evidence import (
    approval_verify,
    decision_expiry_problem,
    decision_verify,
    reviewer_name_problem,
    state_evidence_findings,
)
from runtime.core.invariants import check_invariants
from runtime.core.ledger import LedgerEntry, LedgerKind, ledger_chain_check
from runtime.core.nesting import EMBEDDING_NESTING_DEPTH, json_loads_bounded
from runtime.core.passkey_evidence import state_passkey_findings
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.errors import BundleFormatError, LedgerChainError, RatchetError, WrongTrustRootError
from runtime.keys import keyring_for, public_keys_load, reviewer_names


@dataclass(frozen=True)
class BundleTrust:
    """The keys a bundle is verified with (DESIGN.md section 4.8).

    Attributes:
        export, approval, reviewer: verifying keyrings of those roots (public keys suffice).
        reviewer_names: key id -> the reviewer name a person's own key is bound to.
        checkpoint: the checkpoint HMAC keyring, if the verifier holds it (an operator); None for
            an auditor, who then relies on the export signature over the envelopes.
    """

    export: Keyring
    approval: Keyring
    reviewer: Keyring
    reviewer_names: dict[str, str] = field(default_factory=dict)
    checkpoint: Keyring | None = None


def bundle_trust(*, public_keys: Path | None = None, checkpoint: Keyring | None = None) -> BundleTrust:
    """The trust to verify bundles with: the public-key file ``public_keys`` if given, else the
    configured keys (environment or key file, never created here).

    Raises:
        KeyringError: a root's public keys are missing or the file is not a public-key file.
    """
    if public_keys is not None:
        rings = public_keys_load(public_keys)
        return BundleTrust(export=rings[TrustRoot.EXPORT], approval=rings[TrustRoot.APPROVAL],
                           reviewer=rings[TrustRoot.REVIEWER],
                           reviewer_names=reviewer_names(path=public_keys), checkpoint=checkpoint)
    return BundleTrust(export=keyring_for(TrustRoot.EXPORT, create=False),
                       approval=keyring_for(TrustRoot.APPROVAL, create=False),
                       reviewer=keyring_for(TrustRoot.REVIEWER, create=False),
                       reviewer_names=reviewer_names(), checkpoint=checkpoint)


def bundle_load(text: str | bytes) -> dict[str, Any]:
    """Parse a bundle file's text.

    Raises:
        BundleFormatError: not JSON, or not a JSON object.
    """
    try:
        data = json_loads_bounded(text, what="the bundle", limit=EMBEDDING_NESTING_DEPTH)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleFormatError(f"the file is not JSON: {exc}") from None
    except RecursionError:
        raise BundleFormatError("the file nests JSON too deeply to be a bundle") from None
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
            bundle_signed_message(unsigned),
            Signature(key_id=signature.get("key_id"), mac=signature.get("mac")),
        )
    except RatchetError as exc:
        return [f"signature: {exc.message} (key id {signature.get('key_id')!s:.64})"]
    return []


def _open(raw: bytes, keyring: Keyring | None) -> CheckpointEnvelope | None:
    """Open an envelope: fully (HMAC, migration) with the checkpoint key, else parse the current
    schema and check its invariants; None for an older schema without the key (its bytes are
    still covered by the digest and the export signature).

    Raises:
        RatchetError: the envelope does not open; ValueError: it does not parse.
    """
    if keyring is not None:
        return open_envelope(raw, keyring=keyring)
    try:
        version = json.loads(raw).get("schema_version")
    except (ValueError, AttributeError, RecursionError):
        raise ValueError("envelope is not a JSON object") from None
    if version != SCHEMA_VERSION:
        return None
    try:
        envelope = CheckpointEnvelope.model_validate_json(raw)
    except ValidationError as exc:
        raise ValueError(f"envelope does not match the schema ({exc.error_count()} errors)") from None
    check_invariants(envelope.payload)
    return envelope


def _check_checkpoints(
    bundle: Mapping[str, Any], keyring: Keyring | None, run: Mapping[str, Any], trust: BundleTrust
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
            envelope = _open(raw, keyring)
        except RatchetError as exc:
            findings.append(f"{where}: does not open: {exc.message}")
            continue
        except ValueError as exc:
            findings.append(f"{where}: does not open: {exc}")
            continue
        if envelope is None:
            if entry is committed:
                findings.append(f"{where}: older schema; the checkpoint key is needed to open it")
            continue
        findings += [f"{where}: {f}" for f in state_evidence_findings(
            envelope.payload, approval=trust.approval, reviewer=trust.reviewer,
            reviewer_names=trust.reviewer_names)]
        findings += [f"{where}: {f}" for f in state_passkey_findings(envelope.payload)]
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
        state = opened.payload
        disagreement = run_row_disagreement(
            row_phase=str(run.get("phase")), row_stop_reason=str(run.get("stop_reason") or ""),
            row_generation=run.get("generation"), signed_phase=state.phase.value,
            signed_stop_reason=state.stop_reason.value if state.stop_reason else "",
            signed_generation=opened.generation)
        if disagreement is not None:
            findings.append(f"run: {disagreement}")
        if run.get("generation") != opened.generation:
            # The export reads the row and the mark under one lock, so they name one commit; a
            # mark still to be completed is completed before export (DESIGN.md section 4.10).
            findings.append(f"run: the run row says generation {run.get('generation')} but the committed "
                            f"checkpoint is generation {opened.generation}")
    return findings, opened


def _raw_or_empty(entry: Mapping[str, Any]) -> bytes:
    try:
        return _raw_envelope(entry)
    except ValueError:
        return b""


def _check_trace(bundle: Mapping[str, Any], run: Mapping[str, Any]) -> list[str]:
    from runtime.evidence.trace import event_hash, genesis_hash  # pure functions; no database is touched

    events = bundle["trace"]
    run_id = run.get("run_id")
    expected_prev = genesis_hash(run_id)
    previous_time: datetime | None = None
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
        if previous_time is not None and created < previous_time:
            return [f"trace: event seq {seq} is dated before the event before it (time order)"]
        previous_time = created
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
        findings += _check_ledger(bundle, opened)
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
            if ref is None and case.get("reason") in ROW_ONLY_CASE_REASONS:
                continue  # opened without a commit (DESIGN.md section 4.15); it holds a run back
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


def _check_ledger(bundle: Mapping[str, Any], opened: CheckpointEnvelope) -> list[str]:
    """The bundle's ledger entries chain to the committed checkpoint's ``(length, head)``, in
    full, and its receipts are exactly the ledger's executed writes (DESIGN.md section 3.1)."""
    try:
        entries = [
            LedgerEntry(seq=e["seq"], kind=LedgerKind(e["kind"]), key=e["key"],
                        body=e["body"].encode("utf-8"), prev_hash=e["prev_hash"],
                        entry_hash=e["entry_hash"])
            for e in bundle.get("ledger", [])
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        return ["ledger: an entry is malformed"]
    try:
        ledger_chain_check(run_id=opened.run_id, start=LedgerHead(), rows=entries,
                           expected=opened.payload.ledger)
    except LedgerChainError as exc:
        return [f"ledger: {exc.message}"]
    executed = [json.loads(e.body) for e in entries if e.kind == LedgerKind.EXECUTED_WRITE]
    executed += [json.loads(body) for kind, _key, body in opened.carried_ledger
                 if kind == LedgerKind.EXECUTED_WRITE]
    if executed != bundle["receipts"]:
        return ["receipts: differ from the executed writes the committed checkpoint's ledger holds"]
    return []


def _check_loose_evidence(bundle: Mapping[str, Any], trust: BundleTrust) -> list[str]:
    """Approvals and decisions the trace and the case rows carry outside any checkpoint."""
    findings = []
    for event in bundle["trace"]:
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        for name in ("approval", "sealed"):
            item = payload.get(name)
            if isinstance(item, dict) and "approval_id" in item:
                findings += _approval_finding(item, f"trace seq {event.get('seq')}", trust)
        if event.get("event_type") == AMENDED_EVENT:  # signed record, both intents (DESIGN.md section 6.13)
            findings += amendment_findings(payload, trust.approval, where=f"trace seq {event.get('seq')}")
        sealed = payload.get("sealed")
        if isinstance(sealed, dict) and isinstance(sealed.get("decision"), dict):
            findings += _decision_finding(sealed["decision"], f"trace seq {event.get('seq')}", trust)
    for case in bundle["review_cases"]:
        if isinstance(case.get("decision"), dict):
            findings += _decision_finding(case["decision"], f"review case {case.get('case_id')}", trust)
    return findings + _denial_findings(bundle, trust)


def _denial_findings(bundle: Mapping[str, Any], trust: BundleTrust) -> list[str]:
    """Signed denials (DESIGN.md section 6.14) in the ledger (filed under their own key, for this
    run; the chain check covers which entries there are) and in the trace's denial events."""
    run_id = bundle["run"]["run_id"]
    found = [(f"ledger entry {e.get('seq')}", denial_problem(json.loads(e["body"]), keyring=trust.approval,
                                                              run_id=run_id, key=e.get("key")))
             for e in bundle.get("ledger", []) if e.get("kind") == LedgerKind.DENIED_WRITE]
    for event in bundle["trace"]:
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        if "denial" in payload:
            found.append((f"trace seq {event.get('seq')}", denial_problem(payload["denial"], keyring=trust.approval,
                                                                          run_id=run_id)))
    return [f"{where}: {problem}" for where, problem in found if problem]


def _approval_finding(data: Mapping[str, Any], where: str, trust: BundleTrust) -> list[str]:
    try:
        evidence = ApprovalEvidence.model_validate(data, strict=False)
        approval_verify(evidence, trust.approval)
    except ValidationError:
        return [f"{where}: approval is malformed"]
    except RatchetError as exc:
        return [f"{where}: approval {data.get('approval_id')!s:.64}: {exc.message}"]
    return []


def _decision_finding(data: Mapping[str, Any], where: str, trust: BundleTrust) -> list[str]:
    try:
        decision = SignedDecision.model_validate(data, strict=False)
        decision_verify(decision, trust.reviewer)
    except ValidationError:
        return [f"{where}: decision is malformed"]
    except RatchetError as exc:
        return [f"{where}: decision: {exc.message}"]
    problems = (reviewer_name_problem(decision, trust.reviewer_names), decision_expiry_problem(decision))
    return [f"{where}: decision: {problem}" for problem in problems if problem]


def bundle_verify(bundle: Mapping[str, Any], keyring: Keyring | None = None, *,
                  trust: BundleTrust | None = None) -> list[str]:
    """Check an evidence bundle offline; return the findings (``[]``: it verifies).

    Args:
        bundle: the parsed bundle (see :func:`bundle_load`).
        keyring: the checkpoint trust root's HMAC keyring, if the verifier holds it (then every
            envelope's HMAC is checked too); None: public keys alone.
        trust: the public keys (:func:`bundle_trust`); None: the configured ones. Every keyring
            verifies with any key it trusts, so bundles signed before a rotation still verify.

    Returns:
        One line per failed check, naming what failed (run, generation, seq, key id; never key
        material). Checks: export signature and purpose; every checkpoint envelope hashes to its
        digest and parses (schema, invariants; HMAC with ``keyring``); every approval and
        decision inside verifies under its root's public keys and names the reviewer its key is
        bound to; every amendment's signed record binds the superseded and the amended action
        and the approval of the amended intent (DESIGN.md section 6.13); the committed envelope
        is the HWM's generation and digest and matches the run identity; the trace chain
        recomputes from genesis to the run's recorded head and its times never go backwards;
        receipt fingerprints; receipts and case decisions match the committed checkpoint
        (DESIGN.md section 4.8).

    Raises:
        WrongTrustRootError: ``keyring`` is not the checkpoint trust root's.
        KeyringError: ``trust`` is None and the public keys are not configured.
    """
    if keyring is not None and keyring.root != TrustRoot.CHECKPOINT:
        raise WrongTrustRootError(
            "envelopes in a bundle are opened under the checkpoint trust root", root=keyring.root.value
        )
    if trust is None:
        trust = bundle_trust(checkpoint=keyring)
    if not isinstance(bundle, Mapping):
        return ["bundle: not a JSON object"]
    findings = _check_signature(bundle, trust.export)
    try:
        run = bundle["run"]
        if not isinstance(run, dict) or not isinstance(run.get("run_id"), str):
            return [*findings, "run: missing or malformed"]
        checkpoint_findings, opened = _check_checkpoints(bundle, keyring, run, trust)
        findings += checkpoint_findings
        findings += _check_loose_evidence(bundle, trust)
        findings += _check_trace(bundle, run)
        findings += _check_receipts(bundle, opened)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError, RatchetError) as exc:
        # A mangled bundle must produce a finding, never a traceback.
        findings.append(f"bundle: malformed ({type(exc).__name__}: {str(exc)[:200]})")
    return findings
