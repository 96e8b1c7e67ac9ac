"""The signed checkpoint envelope: sealing and opening (DESIGN.md sections 3 and 4).

A stored checkpoint is a :class:`CheckpointEnvelope`: schema version, run identity, generation,
key id and an HMAC-SHA256 under the checkpoint trust root, around a ``RunState`` payload. The
bytes are RFC 8785 canonical JSON holding every field of the schema.

Public entry points:
    :func:`seal`             validate, wrap in an envelope and sign with the checkpoint keyring.
    :func:`open_envelope`    parse, verify the MAC, migrate old schema versions, validate.
    :func:`envelope_digest`  the untagged digest the high-water mark records.

Imports run one way: this module -> ``runtime.core.migrators`` -> ``runtime.core.checkpoint``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, Field, PrivateAttr, StringConstraints, ValidationError

from runtime.core.canonical import canonical_json, digest_bytes
from runtime.core.checkpoint import SCHEMA_VERSION, ExecutedWrite, Ident, LedgerHead, RunState, Strict
from runtime.core.invariants import (
    check_invariants,
    require_complete,
    schema_error,
    validate_state_encoded,
)
from runtime.core.ledger import LedgerView
from runtime.core.migrators import CARRIED_LEDGER, migrate_envelope
from runtime.core.nesting import MAX_NESTING_DEPTH, json_loads_bounded, json_text_depth
from runtime.core.signing import Keyring, Signature, TrustRoot
from runtime.errors import (
    CanonicalizationError,
    CheckpointCorruptError,
    CheckpointError,
    CheckpointInvariantError,
    CheckpointMigrationError,
    CheckpointSchemaError,
    NestingTooDeepError,
    SigningError,
    WrongTrustRootError,
)


class CheckpointEnvelope(Strict):
    """Signed wrapper: schema version, identity, generation, key id and MAC around the state."""

    schema_version: Literal[3]
    run_id: Ident
    tenant_id: Ident
    task_id: Ident
    environment_instance_id: Ident
    generation: Annotated[int, Field(ge=1)]
    created_at: AwareDatetime
    key_id: Ident
    mac: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
    payload: RunState

    _carried: list[Any] = PrivateAttr(default_factory=list)

    @property
    def carried_ledger(self) -> list[Any]:
        """Ledger entries a schema migration moved out of the payload, staged for the next commit
        (``(kind, key, body bytes)`` as ``LedgerView.staged`` holds them; empty for v3)."""
        return self._carried


# Top-level envelope members in RFC 8785 order around the state: the payload is encoded once and
# spliced between them (DESIGN.md section 4, "encode once"). ``mac`` sorts between ``key_id`` and
# ``payload``; tests/core/test_envelope_encoding.py checks the bytes equal canonical_json(body).
_HEAD_FIELDS = ("created_at", "environment_instance_id", "generation", "key_id")
_TAIL_FIELDS = ("run_id", "schema_version", "task_id", "tenant_id")


def _envelope_bytes(body: dict[str, Any], payload: bytes, mac: str | None) -> bytes:
    head = canonical_json({k: body[k] for k in _HEAD_FIELDS})[:-1]
    tail = canonical_json({k: body[k] for k in _TAIL_FIELDS})[1:]
    middle = b"" if mac is None else b',"mac":' + canonical_json(mac)
    return head + middle + b',"payload":' + payload + b"," + tail


def _signed_bytes(envelope_without_mac: dict[str, Any]) -> bytes:
    return canonical_json(envelope_without_mac)


def _require_checkpoint_root(keyring: Keyring) -> None:
    if not isinstance(keyring, Keyring) or keyring.root != TrustRoot.CHECKPOINT:
        raise WrongTrustRootError(
            "checkpoints are signed and verified only with the checkpoint trust root",
            root=getattr(getattr(keyring, "root", None), "value", type(keyring).__name__),
        )


def seal(state: RunState, *, generation: int, keyring: Keyring, created_at: datetime | None = None
         ) -> tuple[bytes, CheckpointEnvelope]:
    """Validate ``state`` and return ``(envelope_bytes, envelope)`` signed for ``generation``.

    Every check runs before the MAC is computed, so nothing invalid is ever signed (DESIGN.md
    section 4). The bytes are RFC 8785 canonical JSON holding every field of the schema.

    Args:
        state: the run state to checkpoint.
        generation: the generation this checkpoint will have (HWM + 1), an int >= 1.
        keyring: the checkpoint trust root's keyring (signs with its current key).
        created_at: timezone-aware timestamp to record; defaults to now (UTC).

    Raises:
        WrongTrustRootError: the keyring is not the checkpoint trust root's (a ``ValueError``).
        CheckpointSchemaError: ``generation`` is not an int >= 1, ``created_at`` is naive, or
            the state nests deeper than ``MAX_NESTING_DEPTH`` (it could never be opened again;
            DESIGN.md section 2.2).
        CanonicalizationError, CheckpointSchemaError, CheckpointInvariantError: from
            ``runtime.core.invariants.validate_state``.
    """
    _require_checkpoint_root(keyring)
    run_id = getattr(getattr(state, "identity", None), "run_id", None)
    if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
        raise CheckpointSchemaError("generation must be an integer >= 1", run_id=run_id)
    stamp = datetime.now(UTC) if created_at is None else created_at
    if not isinstance(stamp, datetime) or stamp.utcoffset() is None:
        raise CheckpointSchemaError("created_at must be a timezone-aware datetime", run_id=run_id)
    clean, payload = validate_state_encoded(state)
    if json_text_depth(payload) + 1 > MAX_NESTING_DEPTH:  # + 1: the envelope around the payload
        raise CheckpointSchemaError(
            f"run state nests more than {MAX_NESTING_DEPTH - 1} levels deep (action params or "
            "a receipt result); open_envelope would refuse it", run_id=run_id)
    body: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run_id": clean.identity.run_id,
        "tenant_id": clean.identity.tenant_id,
        "task_id": clean.identity.task_id,
        "environment_instance_id": clean.environment.instance_id,
        "generation": generation,
        "created_at": stamp.isoformat(),
        "key_id": keyring.current_key_id,
    }
    try:
        signed = _envelope_bytes(body, payload, None)
    except CanonicalizationError as exc:
        raise CanonicalizationError(exc.message, run_id=clean.identity.run_id, generation=generation
                                    ) from None
    signature = keyring.sign(signed)
    raw = _envelope_bytes(body, payload, signature.mac)
    # Everything was validated above (schema, completeness, invariants on the canonical bytes):
    # build the envelope without a second encode-and-parse of the whole state.
    envelope = CheckpointEnvelope.model_construct(
        **{**body, "created_at": stamp, "mac": signature.mac, "payload": clean})
    _check_envelope_matches_payload(envelope)
    return raw, envelope


def envelope_digest(raw: bytes) -> str:
    """Untagged digest of stored envelope bytes.

    The HWM records it so that restore loads exactly these bytes; on its own it proves nothing
    about authenticity (DESIGN.md section 4).
    """
    return digest_bytes(raw)


class _DuplicateKeyError(ValueError):
    pass


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads keeps the last of two equal keys; a reader that kept the first would see other
    # data under the same MAC, so repeated keys are corruption.
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(key)
        out[key] = value
    return out


def _envelope_from_body(body: dict[str, Any], *, context: dict[str, Any]) -> CheckpointEnvelope:
    run_id = body.get("run_id") if isinstance(body.get("run_id"), str) else None
    try:
        envelope = CheckpointEnvelope.model_validate_json(canonical_json(body))
    except ValidationError as exc:
        raise schema_error(exc, run_id=run_id, **context) from None
    require_complete(envelope, "", run_id=run_id, **context)
    _check_envelope_matches_payload(envelope)
    check_invariants(envelope.payload)
    return envelope


def open_envelope(raw: bytes, *, keyring: Keyring) -> CheckpointEnvelope:
    """Parse, authenticate, migrate and validate stored envelope bytes.

    Order matters: the MAC is checked over the envelope as written (any schema version) before
    any migration runs, so a forged old-version checkpoint is never migrated into a trusted one
    (DESIGN.md sections 3-4). Nothing here changes ``raw``: a checkpoint that fails to open is
    still there for manual handling.

    Args:
        raw: the stored envelope bytes (``bytes``, ``bytearray`` or ``memoryview``).
        keyring: the checkpoint trust root's keyring; any key it still trusts verifies.

    Raises:
        WrongTrustRootError: ``keyring`` is not the checkpoint trust root's.
        CheckpointCorruptError: not JSON, nested deeper than ``MAX_NESTING_DEPTH`` (checked on
            the raw bytes before parsing; DESIGN.md section 2.2), a repeated key, not
            canonical-JSON values, or not an object with a key id and MAC.
        UnknownKeyError / BadSignatureError: the MAC does not verify under ``keyring``.
        CheckpointMigrationError: the schema version is unknown, has no migrator, or the
            migrated checkpoint is not valid at the current version.
        CheckpointSchemaError / CheckpointInvariantError: the (current-version) payload is invalid.
    """
    _require_checkpoint_root(keyring)
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise CheckpointCorruptError(f"checkpoint must be bytes, got {type(raw).__name__}")
    try:
        body = json_loads_bounded(raw, what="checkpoint JSON", object_pairs_hook=_reject_duplicate_keys)
    except _DuplicateKeyError:
        raise CheckpointCorruptError("checkpoint JSON repeats a key") from None
    except NestingTooDeepError as exc:
        raise CheckpointCorruptError(exc.message) from None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise CheckpointCorruptError("checkpoint bytes are not JSON") from None
    if not isinstance(body, dict):
        raise CheckpointCorruptError("checkpoint is not a JSON object")
    run_id = body.get("run_id") if isinstance(body.get("run_id"), str) else None
    generation = body.get("generation") if type(body.get("generation")) is int else None
    key_id, mac = body.get("key_id"), body.get("mac")
    if not isinstance(key_id, str) or not isinstance(mac, str):
        raise CheckpointCorruptError("checkpoint has no key id or MAC", run_id=run_id)
    version = body.get("schema_version")
    if version == SCHEMA_VERSION and _verify_spliced(bytes(raw), body, keyring):
        try:
            envelope = CheckpointEnvelope.model_validate_json(bytes(raw))
        except ValidationError as exc:
            raise schema_error(exc, run_id=run_id, generation=generation) from None
        require_complete(envelope, "", run_id=run_id, generation=generation)
        _check_envelope_matches_payload(envelope)
        check_invariants(envelope.payload)
        return envelope
    unsigned = {k: v for k, v in body.items() if k != "mac"}
    try:
        signed = _signed_bytes(unsigned)
    except CanonicalizationError:
        raise CheckpointCorruptError(
            "checkpoint body is not canonical JSON", run_id=run_id
        ) from None
    keyring.verify(signed, Signature(key_id=key_id, mac=mac))

    if type(version) is not int:
        raise CheckpointMigrationError(
            "checkpoint has no integer schema_version", run_id=run_id, generation=generation
        )
    if version == SCHEMA_VERSION:
        return _envelope_from_body(body, context={"generation": generation})
    migrated = migrate_envelope(body)
    carried = migrated.pop(CARRIED_LEDGER, None)
    try:
        envelope = _envelope_from_body(migrated, context={"generation": generation})
        if carried:
            envelope._carried = _carried_entries(envelope, carried)
        return envelope
    except (CheckpointError, CanonicalizationError, ValidationError) as exc:
        if isinstance(exc, ValidationError):
            exc = schema_error(exc, run_id=run_id, generation=generation)
        raise CheckpointMigrationError(
            f"checkpoint migrated from schema v{version} is not a valid v{SCHEMA_VERSION} "
            f"checkpoint: {exc.message}",
            run_id=run_id,
            generation=generation,
            schema_version=version,
        ) from None


def _verify_spliced(raw: bytes, body: dict[str, Any], keyring: Keyring) -> bool:
    """Verify the MAC over ``raw`` minus its ``mac`` member, without re-encoding the state.

    Stored envelopes are canonical, so the signed bytes are the stored bytes with the top-level
    ``"mac"`` member cut out. False (the caller falls back to re-encoding the parsed body, which
    names corruption precisely) when the bytes are not laid out that way or do not verify.
    """
    try:
        head = canonical_json({k: body[k] for k in _HEAD_FIELDS})[:-1]
        member = b',"mac":' + canonical_json(body["mac"])
    except (KeyError, CanonicalizationError):
        return False
    if not raw.startswith(head + member):
        return False
    signed = head + raw[len(head) + len(member):]
    try:
        keyring.verify(signed, Signature(key_id=body["key_id"], mac=body["mac"]))
    except (SigningError, ValueError):
        return False
    return True


def _carried_entries(envelope: CheckpointEnvelope, carried: dict[str, Any]) -> list[Any]:
    """Stage a migrated checkpoint's lists as ledger entries, validating each (section 3.1)."""
    view = LedgerView(run_id=envelope.run_id, head=LedgerHead(), reader=None)
    for item in carried.get("executed", []):
        view.record_executed(ExecutedWrite.model_validate(item, strict=False))
    for nonce in carried.get("consumed_nonces", []):
        view.consume_nonce(nonce)
    for key in carried.get("quarantined_keys", []):
        view.quarantine_key(key)
    return view.staged


def _check_envelope_matches_payload(envelope: CheckpointEnvelope) -> None:
    p = envelope.payload
    pairs = (
        ("run_id", envelope.run_id, p.identity.run_id),
        ("tenant_id", envelope.tenant_id, p.identity.tenant_id),
        ("task_id", envelope.task_id, p.identity.task_id),
        ("environment_instance_id", envelope.environment_instance_id, p.environment.instance_id),
    )
    for name, outer, inner in pairs:
        if outer != inner:
            raise CheckpointInvariantError(
                f"envelope {name} differs from the payload's",
                run_id=envelope.run_id,
                generation=envelope.generation,
            )
