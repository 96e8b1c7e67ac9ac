"""RFC 8785 canonical JSON and typed SHA-256 digests.

Every digest the runtime stores is ``"sha256:" + 64 lowercase hex`` over the RFC 8785 (JSON
Canonicalization Scheme) encoding of a JSON value, prefixed by a domain tag so that an intent
digest can never be confused with a receipt digest of the same bytes (DESIGN.md sections 3 and 5).

Canonical bytes come from the C-accelerated standard ``json`` encoder wherever its output is
byte-identical to RFC 8785 (strings, integers within the exact double range, booleans, null,
arrays, objects whose keys are all in the Basic Multilingual Plane). Only the containers on the
path to what it cannot write are encoded here: floats, whose RFC 8785 form is ECMAScript's
number-to-string (:func:`_es_number`, from Python's shortest round-trip ``repr``), and objects
with keys outside the Basic Multilingual Plane, which RFC 8785 orders by UTF-16 code units where
``json`` orders by code points. Every subtree without those still goes through the C encoder, so
a state holding two floats costs two small Python encodings, not a pure-Python walk of the whole
value. ``tests/core/test_canonical_fast_path.py`` checks the identity against the reference
``rfc8785`` package on generated values. This module also adds the domain separation and the
typed ``Digest`` string.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from enum import StrEnum
from typing import Any

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
        slow: set[int] = set()
        if _scan(value, slow):
            return _FAST_ENCODER.encode(value).encode("utf-8")
        return _encode(value, slow).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalizationError("value cannot be canonicalised: a string holds a lone surrogate") from None
    except (TypeError, ValueError) as exc:
        raise CanonicalizationError(f"value cannot be canonicalised: {exc}") from None
    except RecursionError:
        # A hostile or runaway structure must fail typed, not crash the worker with a bare error.
        raise CanonicalizationError("value is nested too deeply to canonicalise") from None


def _scan(value: Any, slow: set[int]) -> bool:
    """True when the standard encoder's output for ``value`` is exactly its RFC 8785 form; else
    add the ``id`` of every container on the way to what it cannot write to ``slow``.

    Raises:
        CanonicalizationError: an integer outside the exact double range, NaN or Infinity, a
            non-str key, or a non-JSON type (found here because the standard encoder would
            silently accept or coerce some of them).
        RecursionError: nesting too deep (the caller turns it into a typed error).
    """
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    if kind is dict or (kind is not list and isinstance(value, dict)):
        fast = True
        for key, item in value.items():
            if type(key) is not str and not isinstance(key, str):
                raise CanonicalizationError(f"object key {key!r:.40} is not a string")
            if not key.isascii() and max(key) > "\uffff":
                fast = False  # UTF-16 ordering differs from code-point ordering for astral keys
            if not _scan(item, slow):
                fast = False
        if not fast:
            slow.add(id(value))
        return fast
    if kind is list or isinstance(value, list | tuple):
        # A list comprehension, not a generator: every item is scanned (and flagged).
        if all([_scan(item, slow) for item in value]):
            return True
        slow.add(id(value))
        return False
    if isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        if -_MAX_EXACT_INT <= value <= _MAX_EXACT_INT:
            return True
        raise CanonicalizationError(f"integer {value} is outside the exactly representable range of a double")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalizationError("value cannot be canonicalised: NaN and Infinity have no JSON form")
        return False  # ECMAScript number formatting (_es_number)
    raise CanonicalizationError(f"value cannot be canonicalised: {type(value).__name__} is not a JSON type")


def _encode(value: Any, slow: set[int]) -> str:
    """RFC 8785 text of ``value`` that :func:`_scan` flagged: containers in ``slow`` are written
    here, everything else by the C encoder."""
    if isinstance(value, float) and not isinstance(value, bool):
        return _es_number(value)
    if id(value) not in slow:
        return _FAST_ENCODER.encode(value)
    if isinstance(value, dict):
        keys = list(value)
        if any(not key.isascii() and max(key) > "\uffff" for key in keys):
            keys.sort(key=lambda key: key.encode("utf-16-be"))
        else:
            keys.sort()
        return "{" + ",".join(_encode_str(key) + ":" + _encode(value[key], slow) for key in keys) + "}"
    return "[" + ",".join(_encode(item, slow) for item in value) + "]"


_encode_str = json.encoder.encode_basestring  # the C string writer (not ASCII-only), as json's


def _es_number(number: float) -> str:
    """ECMAScript's ``Number.prototype.toString`` of a finite double (RFC 8785 section 3.2.2.3).

    Python's ``repr`` gives the shortest digit string that round-trips (the digits ECMAScript
    asks for); this only places the decimal point or exponent the way ECMAScript does.
    """
    if number == 0:
        return "0"  # also -0.0
    text = repr(number)
    sign = "-" if text[0] == "-" else ""
    mantissa, _, exponent = text.lstrip("-").partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    significant = digits.lstrip("0")
    # The value is 0.<significant> x 10**point.
    point = len(whole) + (int(exponent) if exponent else 0) - (len(digits) - len(significant))
    significant = significant.rstrip("0")
    count = len(significant)
    if count <= point <= 21:
        out = significant + "0" * (point - count)
    elif 0 < point <= 21:
        out = significant[:point] + "." + significant[point:]
    elif -6 < point <= 0:
        out = "0." + "0" * -point + significant
    else:
        power = point - 1
        out = (significant[0] + ("." + significant[1:] if count > 1 else "")
               + ("e+" if power >= 0 else "e-") + str(abs(power)))
    return sign + out


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
