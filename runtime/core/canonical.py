"""RFC 8785 canonical JSON and typed SHA-256 digests.

Every digest the runtime stores is ``"sha256:" + 64 lowercase hex`` over the RFC 8785 (JSON
Canonicalization Scheme) encoding of a JSON value, prefixed by a domain tag so that an intent
digest can never be confused with a receipt digest of the same bytes (DESIGN.md sections 3 and 5).

Canonical bytes come from the C-accelerated standard ``json`` encoder wherever its output is
byte-identical to RFC 8785 (every value Ratchet stores: strings, integers within the exact double
range, booleans, null, arrays, objects), and from the reference ``rfc8785`` package otherwise
(floats, whose RFC 8785 form is ECMAScript's number-to-string, and object keys outside the Basic
Multilingual Plane, which RFC 8785 orders by UTF-16 code units where ``json`` orders by code
points). ``tests/core/test_canonical_fast_path.py`` checks the identity against the reference on
generated values. This module also adds the domain separation and the typed ``Digest`` string.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Any

import rfc8785

from runtime.errors import CanonicalizationError, DigestFormatError, UnknownDigestKindError

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")

# RFC 8785 numbers are IEEE-754 doubles: integers beyond 2**53 - 1 have no exact form.
_MAX_EXACT_INT = 2**53 - 1
_FAST_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


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
    LEDGER = "ledger"


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
        if _fast_path_applies(value):
            return _FAST_ENCODER.encode(value).encode("utf-8")
        return rfc8785.dumps(value)
    except UnicodeEncodeError:
        raise CanonicalizationError("value cannot be canonicalised: a string holds a lone surrogate") from None
    except (rfc8785.CanonicalizationError, TypeError, ValueError) as exc:
        raise CanonicalizationError(f"value cannot be canonicalised: {exc}") from None
    except RecursionError:
        # A hostile or runaway structure must fail typed, not crash the worker with a bare error.
        raise CanonicalizationError("value is nested too deeply to canonicalise") from None


def _fast_path_applies(value: Any) -> bool:
    """True when the standard encoder's output for ``value`` is exactly its RFC 8785 form.

    Raises:
        CanonicalizationError: an integer outside the exact double range, or a non-str key
            (found here because the standard encoder would silently accept or coerce them).
        RecursionError: nesting too deep (the caller turns it into a typed error).
    """
    if isinstance(value, str) or value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
            return True
        raise CanonicalizationError(f"integer {value} is outside the exactly representable range of a double")
    if isinstance(value, dict):
        fast = True
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r:.40} is not a string")
            if not key.isascii() and max(key) > "\uffff":
                fast = False  # UTF-16 ordering differs from code-point ordering for astral keys
            if not _fast_path_applies(item):
                fast = False
        return fast
    if isinstance(value, list | tuple):
        return all([_fast_path_applies(item) for item in value])
    # Floats (ECMAScript number formatting) and every non-JSON type go to the reference encoder,
    # which formats the former and rejects the latter with its own message.
    return False


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
