"""What the HTTP adapter expects of a service beyond the Idempotency-Key draft (DESIGN.md section 5.8).

The IETF httpapi ``Idempotency-Key`` draft gives replay (same key, same payload: the original
response), 422 (same key, other payload) and 409 (still in flight). To settle crash window 3
by key and to tell "the pending write landed" from drift, the adapter also needs three reads,
which the orders service (:mod:`runtime.services.orders_service`) implements:

* **lookup by key** -- ``GET <lookup path>``: 404 when the key is unknown, else the stored
  record ``{"key", "status": "processing"|"complete", "request_fingerprint", "intent_digest",
  "approval_digest", "fencing_token", "response": {"status", "body", "location"},
  "ledger_version", "committed_at", "in_flight"}``. The stored response is the authoritative
  receipt; a ``processing`` record with ``in_flight`` false is a lapsed claim (its request died
  before committing) and counts as no receipt.
* **state** -- ``GET <state path>``: ``{"instance_id", "ledger_version", "ledger_head"}``, a
  hash chain over the request fingerprints of the completed writes, so the adapter can predict
  the single post-state of one write (:func:`ledger_next`) without changing anything.
* **probe** -- ``GET <probe path>``: 200 while the credential is valid, 401/403 otherwise.

The client sends ``Ratchet-Intent-Digest`` and ``Ratchet-Approval-Digest`` headers; the service
stores them with the key, so a same-key/different-intent write is recognised as the conflict it
is. Imports nothing from Django.
"""

from __future__ import annotations

from typing import Any

from runtime.core.canonical import canonical_json, sha256_hex

IDEMPOTENCY_HEADER = "Idempotency-Key"
INTENT_HEADER = "Ratchet-Intent-Digest"
APPROVAL_HEADER = "Ratchet-Approval-Digest"
DEADLINE_HEADER = "Ratchet-Deadline-Seconds"
"""Seconds (decimal) left before the write's approval expires, sent with an approved write: a
relative budget, so the service needs no clock agreement to refuse a commit past it."""
DEFAULT_FENCING_HEADER = "Ratchet-Fencing-Token"
REPLAYED_HEADER = "Idempotent-Replayed"

LEDGER_ROOT = "0" * 64
"""The ledger head of a resource nothing was written to yet."""

STALE_FENCE_TYPE = "urn:ratchet:problem:stale-fencing-token"
IN_FLIGHT_TYPE = "urn:ratchet:problem:idempotency-key-in-flight"
KEY_REUSED_TYPE = "urn:ratchet:problem:idempotency-key-reused"
"""``type`` members of the service's ``application/problem+json`` bodies (RFC 9457)."""


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    """Hex sha256 over the canonical JSON of ``{"method", "path", "body"}``: what "same payload" means.

    Args:
        method: upper-case HTTP method.
        path: the request path (no query, no host).
        body: the JSON body (None for none).

    Raises:
        CanonicalizationError: the body is not canonical JSON (a float NaN, a huge integer).
    """
    return sha256_hex(b"ratchet-http-request\x00" + canonical_json(
        {"method": method.upper(), "path": path, "body": body}))


def ledger_next(head: str, fingerprint: str) -> str:
    """The ledger head after one more completed write with request ``fingerprint`` (hex)."""
    return sha256_hex(f"{head}:{fingerprint}".encode("ascii"))
