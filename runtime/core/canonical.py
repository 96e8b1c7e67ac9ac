"""RFC 8785 canonical JSON and typed SHA-256 digests.

Every digest the runtime stores is ``"sha256:" + 64 lowercase hex`` over the RFC 8785 (JSON
Canonicalization Scheme) encoding of a JSON value, prefixed by a domain tag so that an intent
digest can never be confused with a receipt digest of the same bytes (DESIGN.md sections 3 and 5).

Canonicalisation itself is delegated to the ``rfc8785`` package; this module only adds the
domain separation and the typed ``Digest`` string.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum
from typing import Any

import rfc8785

from runtime.errors import CanonicalizationError, DigestFormatError, UnknownDigestKindError

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


class DigestKind(StrEnum):
    """Domain tags for typed digests; the tag is hashed in, so kinds never collide."""

    INTENT = "intent"
    RECEIPT = "receipt"
    SCENARIO = "scenario"
    ENVIRONMENT = "environment"
    CHECKPOINT = "checkpoint"
    TRACE = "trace"
    APPROVAL = "approval"
    DECISION = "decision"
    BUNDLE = "bundle"


def canonical_json(value: Any) -> bytes:
    """Encode ``value`` as RFC 8785 canonical JSON (UTF-8 bytes).

    Args:
        value: a JSON value: dict with str keys, list, tuple, str, int, float, bool, None.

    Raises:
        CanonicalizationError: for NaN/Infinity, integers outside the exactly representable
            range of an IEEE-754 double (|n| >= 2**53), non-str keys, strings that are not valid
            Unicode (lone surrogates), nesting too deep to walk, or any non-JSON type (sets,
            bytes, datetimes, Decimals, arbitrary objects).
    """
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalizationError(f"value cannot be canonicalised: {exc}") from None
    except RecursionError:
        # A hostile or runaway structure must fail typed, not crash the worker with a bare error.
        raise CanonicalizationError("value is nested too deeply to canonicalise") from None


def sha256_hex(data: bytes) -> str:
    """Plain SHA-256 of ``data`` as 64 lowercase hex characters.

    Only for content addressing and corruption checks: a plain hash proves nothing about who
    wrote the data (DESIGN.md section 4), that is what the keyrings are for.
    """
    return hashlib.sha256(data).hexdigest()


def digest_bytes(data: bytes) -> str:
    """Untagged content digest ``sha256:<hex>`` of raw bytes (content-addressed attachments).

    Raises:
        CanonicalizationError: ``data`` is not bytes-like (a str would hash an encoding guess).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise CanonicalizationError(f"digest_bytes needs bytes, got {type(data).__name__}")
    return "sha256:" + sha256_hex(bytes(data))


def digest(kind: DigestKind | str, value: Any) -> str:
    """Typed digest of a JSON value: ``sha256(kind || 0x00 || canonical_json(value))``.

    Args:
        kind: the domain tag (``DigestKind``), e.g. ``DigestKind.INTENT``.
        value: any JSON value accepted by :func:`canonical_json`.

    Returns:
        ``"sha256:" + 64 lowercase hex``.

    Raises:
        UnknownDigestKindError: ``kind`` is not a :class:`DigestKind`.
        CanonicalizationError: if ``value`` is not canonical-JSON serialisable.
    """
    try:
        tag = str(DigestKind(kind)).encode("ascii")
    except ValueError:
        raise UnknownDigestKindError(f"unknown digest kind {kind!r:.40}") from None
    return "sha256:" + sha256_hex(tag + b"\x00" + canonical_json(value))


def check_digest(value: str) -> str:
    """Return ``value`` if it is a well-formed ``sha256:<hex>`` digest.

    Raises:
        DigestFormatError: otherwise.
    """
    if not isinstance(value, str) or not DIGEST_RE.match(value):
        raise DigestFormatError(f"not a sha256 digest: {value!r:.80}")
    return value
