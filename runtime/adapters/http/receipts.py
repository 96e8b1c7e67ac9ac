"""The service's stored records as Ratchet receipts and observations (DESIGN.md sections 5.8, 5.9).

The authoritative receipt of an HTTP write is the service's own stored response for the
idempotency key (:mod:`runtime.adapters.http.contract`). Whether the adapter's ``execute`` just
made the write or a recovering worker looks the key up later, the receipt is built here from the
same stored record, so both give the identical receipt (the engine compares them field by field).
The stored response body passes through the :class:`~runtime.adapters.redaction.Redactor` first:
secret and personal fields become keyed digests before the receipt exists. Imports nothing from
Django.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from runtime.adapters.base import Observation
from runtime.adapters.http.contract import ledger_next
from runtime.adapters.redaction import Redactor
from runtime.core.canonical import DIGEST_RE, DigestKind, canonical_json, digest
from runtime.core.checkpoint import Receipt
from runtime.errors import HttpContractError

ADAPTER_KIND = "http"
ADAPTER_VERSION = "ratchet-http/1"


def _field(record: dict[str, Any], name: str, kind: type, **context: Any) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise HttpContractError(f"the service's record has no valid {name!r}", **context)
    return value


def state_parse(state: Any) -> tuple[str, int, str]:
    """``(instance_id, ledger_version, ledger_head)`` of a state response.

    Raises:
        HttpContractError: another shape.
    """
    if not isinstance(state, dict):
        raise HttpContractError("the service's state is not a JSON object")
    instance = _field(state, "instance_id", str)
    version = _field(state, "ledger_version", int)
    head = _field(state, "ledger_head", str)
    if not instance or len(instance) > 150 or version < 0 or len(head) != 64:
        raise HttpContractError("the service's state has an empty instance id, a negative version or a bad head")
    return instance, version, head


def state_fingerprint(instance_id: str, version: int, head: str) -> str:
    """The environment fingerprint of a service state (``DigestKind.ENVIRONMENT``)."""
    return digest(DigestKind.ENVIRONMENT, {"adapter": ADAPTER_KIND, "instance_id": instance_id,
                                           "ledger_version": version, "ledger_head": head})


def state_observation(state: Any) -> Observation:
    """An :class:`Observation` of a state response: version ``l<N>``, fingerprint over the head."""
    instance, version, head = state_parse(state)
    return Observation(instance_id=instance, version=f"l{version}",
                       state_fingerprint=state_fingerprint(instance, version, head), kind=ADAPTER_KIND,
                       attachments={"http-state.json": canonical_json(
                           {"instance_id": instance, "ledger_version": version, "ledger_head": head})})


def state_after(state: Any, fingerprint: str) -> str:
    """The fingerprint the service's state will have after one more write with request ``fingerprint``."""
    instance, version, head = state_parse(state)
    return state_fingerprint(instance, version + 1, ledger_next(head, fingerprint))


def record_receipt(record: Any, *, instance_id: str, redactor: Redactor) -> Receipt:
    """The receipt of a *complete* stored record (see the module docstring).

    ``intent_digest`` is the digest the client stored with the key; a record written without one
    (another client used the key) gets a digest of its request that no intent of ours can equal,
    so the engine sees the conflict it is.

    Raises:
        HttpContractError: the record is not a complete record of the documented shape.
    """
    if not isinstance(record, dict) or record.get("status") != "complete":
        raise HttpContractError("the service's idempotency record is not complete")
    key = _field(record, "key", str)
    context = {"idempotency_key": key}
    response = _field(record, "response", dict, **context)
    fingerprint = _field(record, "request_fingerprint", str, **context)
    version = _field(record, "ledger_version", int, **context)
    receipt_id = _field(record, "receipt_id", str, **context)
    intent = record.get("intent_digest")
    if not isinstance(intent, str) or not DIGEST_RE.match(intent):
        intent = digest(DigestKind.INTENT, {"foreign_http_request": redactor.value_digest(fingerprint)})
    approval = record.get("approval_digest")
    token = record.get("fencing_token")
    try:
        committed = datetime.fromisoformat(_field(record, "committed_at", str, **context))
    except ValueError:
        raise HttpContractError("the service's record has a malformed committed_at", **context) from None
    location = response.get("location") if isinstance(response.get("location"), str) else None
    try:
        return Receipt(
            namespace=f"{ADAPTER_KIND}:{instance_id}", adapter_version=ADAPTER_VERSION, receipt_id=receipt_id,
            idempotency_key=key, intent_digest=intent,
            result={"status": response.get("status"), "body": redactor.redact_json(response.get("body")),
                    "location": location, "method": record.get("method"), "path": record.get("path"),
                    # keyed: a plain hash of a body holding an e-mail address could be guessed
                    "request_digest": redactor.value_digest(fingerprint)},
            environment_version_after=f"l{version}",
            fencing_token=token if isinstance(token, int) and not isinstance(token, bool) and token >= 0 else 0,
            committed_at=committed,
            approval_digest=approval if isinstance(approval, str) and DIGEST_RE.match(approval) else None,
            business_object=location or f"{record.get('method')} {record.get('path')}",
        )
    except ValueError as exc:  # pydantic: a field the Receipt model refuses
        raise HttpContractError(f"the service's record does not make a valid receipt: {type(exc).__name__}",
                                **context) from None
