"""Redacted evidence: secret and personal fields replaced by a keyed digest (DESIGN.md section 5.9).

An adapter declares which fields of what it sends and receives are secret or personal: header
names (``Authorization``), JSON paths into request and response bodies (``customer.email``), SQL
columns. Before any of it reaches a receipt, a checkpoint, the trace, an attachment, a bundle or
a page, the adapter passes it through a :class:`Redactor`, which replaces each such value by

    ``"redacted:hmac-sha256:<key id>:<64 hex>"``

an HMAC-SHA256 under a redaction key that lives outside every record (like the checkpoint keys,
DESIGN.md section 4) over the value's canonical JSON. Equal values give equal digests under one
key, so a reviewer can still see that two receipts name the same customer or the same token, but
nobody without the key can test a guess against a digest.

The small API other adapters (the SQL adapter) reuse:

* :func:`redaction_key_load` -- the key from ``RATCHET_REDACTION_KEY`` (``KEY_ID:BASE64``, at
  least 32 bytes) or, on the embedded default, a key file created owner-only on first use;
* :class:`Redactor` -- ``value_digest(v)``, ``redact_headers(h)``, ``redact_json(doc)``,
  ``redact_columns(row)``, ``scrub_text(text, secrets)``;
* :func:`json_path_parse` -- the dotted path syntax (``a.b``, ``items.*.card``), for validating
  an adapter's options.

Imports nothing from Django. Key bytes are never printed, logged or put in an error message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.core.canonical import canonical_json
from runtime.errors import RedactionKeyError

REDACTION_KEY_ENV = "RATCHET_REDACTION_KEY"
"""Environment variable holding ``KEY_ID:BASE64`` (at least 32 key bytes)."""

REDACTION_KEY_FILE_ENV = "RATCHET_REDACTION_KEY_FILE"
"""Where the embedded default keeps its key (default ``$RATCHET_VAR_DIR/redaction.key``)."""

REDACTED_PREFIX = "redacted:hmac-sha256:"
"""Every redacted value starts with this, so a page can show it as redacted."""

MIN_KEY_BYTES = 32
DEFAULT_SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key")
"""Headers redacted whatever an adapter's options say."""

_KEY_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")
_SEGMENT_RE = re.compile(r"^(\*|[A-Za-z0-9_$@-]{1,100})$")


@dataclass(frozen=True)
class RedactionKey:
    """A redaction key: an id (shown in digests) and the secret bytes (never shown)."""

    key_id: str
    secret: bytes = field(repr=False)


def _default_key_file(environ: Mapping[str, str]) -> Path:
    explicit = environ.get(REDACTION_KEY_FILE_ENV)
    if explicit:
        return Path(explicit)
    var_dir = environ.get("RATCHET_VAR_DIR") or str(Path(__file__).resolve().parents[2] / "var")
    return Path(var_dir) / "redaction.key"


def _parse_key(text: str, *, where: str) -> RedactionKey:
    key_id, sep, b64 = text.strip().partition(":")
    if not sep or not _KEY_ID_RE.match(key_id):
        raise RedactionKeyError(f"{where} is not KEY_ID:BASE64 with a short key id")
    try:
        secret = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise RedactionKeyError(f"{where} is not valid base64 after the key id", key_id=key_id) from None
    if len(secret) < MIN_KEY_BYTES:
        raise RedactionKeyError(f"{where} holds fewer than {MIN_KEY_BYTES} key bytes", key_id=key_id)
    return RedactionKey(key_id=key_id, secret=secret)


def redaction_key_load(*, environ: Mapping[str, str] | None = None, create: bool = True) -> RedactionKey:
    """The redaction key: ``RATCHET_REDACTION_KEY``, else the key file (created 0600 if ``create``).

    Args:
        environ: where to read the variables (default ``os.environ``).
        create: create the key file with a fresh random key when it does not exist.

    Raises:
        RedactionKeyError: the variable or file is malformed, or there is no key and ``create``
            is false. The message never holds key text.
    """
    env = os.environ if environ is None else environ
    if env.get(REDACTION_KEY_ENV):
        return _parse_key(env[REDACTION_KEY_ENV], where=REDACTION_KEY_ENV)
    path = _default_key_file(env)
    if not path.exists():
        if not create:
            raise RedactionKeyError("no redaction key configured", path=path.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = f"redact-{secrets.token_hex(4)}:{base64.b64encode(secrets.token_bytes(32)).decode()}\n"
        try:  # O_EXCL: two processes starting together must not disagree on the key
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
    try:
        return _parse_key(path.read_text(encoding="ascii"), where="the redaction key file")
    except (OSError, UnicodeDecodeError):
        raise RedactionKeyError("the redaction key file is unreadable", path=path.name) from None


def json_path_parse(text: str) -> tuple[str, ...]:
    """Parse a dotted JSON path: ``"customer.email"``, ``"items.*.card"`` (``*``: any key or index).

    Raises:
        ValueError: empty path or a segment with other characters (pydantic reports it with
            the option's TOML path).
    """
    if not isinstance(text, str) or not text:
        raise ValueError("a JSON path is a non-empty dotted string")
    segments = tuple(text.split("."))
    for segment in segments:
        if not _SEGMENT_RE.match(segment):
            raise ValueError(f"JSON path {text!r:.100} has a malformed segment {segment!r:.40}")
    return segments


@dataclass(frozen=True)
class Redactor:
    """Replaces declared secret/personal fields by keyed digests (see the module docstring).

    Args:
        key: the redaction key (from :func:`redaction_key_load`).
        headers: header names to redact, any case; :data:`DEFAULT_SECRET_HEADERS` always are.
        json_paths: dotted paths (:func:`json_path_parse`) redacted in JSON documents.
        columns: column names redacted by :meth:`redact_columns` (SQL rows).
    """

    key: RedactionKey
    headers: frozenset[str] = frozenset()
    json_paths: tuple[tuple[str, ...], ...] = ()
    columns: frozenset[str] = frozenset()

    @classmethod
    def build(cls, *, key: RedactionKey, headers: Iterable[str] = (), json_paths: Iterable[str] = (),
              columns: Iterable[str] = ()) -> Redactor:
        """A redactor from option values (header names, dotted paths, column names).

        Raises:
            ValueError: a malformed JSON path.
        """
        return cls(key=key,
                   headers=frozenset(h.lower() for h in (*DEFAULT_SECRET_HEADERS, *headers)),
                   json_paths=tuple(json_path_parse(p) for p in json_paths),
                   columns=frozenset(columns))

    def value_digest(self, value: Any) -> str:
        """``redacted:hmac-sha256:<key id>:<hex>`` of ``value``'s canonical JSON; equal values, equal digests.

        A value that is already a redaction digest is returned unchanged, so redacting twice is
        harmless.
        """
        if isinstance(value, str) and value.startswith(REDACTED_PREFIX):
            return value
        try:
            material = canonical_json(value)
        except Exception:  # a value JSON cannot hold (a float NaN, bytes): digest its repr's bytes
            material = repr(value).encode("utf-8", "backslashreplace")
        mac = hmac.new(self.key.secret, b"ratchet-redaction\x00" + material, hashlib.sha256).hexdigest()
        return f"{REDACTED_PREFIX}{self.key.key_id}:{mac}"

    def redact_headers(self, headers: Mapping[str, str]) -> dict[str, str]:
        """A copy of ``headers`` with every declared header's value replaced by its digest."""
        return {name: (self.value_digest(value) if name.lower() in self.headers else value)
                for name, value in headers.items()}

    def redact_json(self, document: Any) -> Any:
        """A deep copy of ``document`` with the value at every declared path replaced by its digest.

        Paths that do not exist in the document are skipped; ``*`` matches every key of an
        object and every item of a list.
        """
        result = _copy(document)
        for path in self.json_paths:
            result = _redact_at(result, path, self.value_digest)
        return result

    def redact_columns(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of a database row with every declared column's value replaced by its digest."""
        return {name: (self.value_digest(value) if name in self.columns else value) for name, value in row.items()}

    def scrub_text(self, text: str, secret_values: Iterable[str]) -> str:
        """``text`` (an error message, a diff) with each of ``secret_values`` replaced by its digest."""
        for value in sorted({v for v in secret_values if isinstance(v, str) and len(v) >= 4}, key=len, reverse=True):
            text = text.replace(value, self.value_digest(value))
        return text


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value


def _redact_at(node: Any, path: tuple[str, ...], digest: Any) -> Any:
    if not path:
        return digest(node)
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        for name in list(node) if head == "*" else ([head] if head in node else []):
            node[name] = _redact_at(node[name], rest, digest)
    elif isinstance(node, list):
        indexes = range(len(node)) if head == "*" else ([int(head)] if head.isdigit() and int(head) < len(node) else [])
        for index in indexes:
            node[index] = _redact_at(node[index], rest, digest)
    return node
