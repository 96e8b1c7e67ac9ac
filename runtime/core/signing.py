"""Keyrings and HMAC-SHA256 signing with key ids (DESIGN.md section 4, Authenticity).

A :class:`Keyring` belongs to one trust root (checkpoints, approvals or reviewer decisions) and
holds named keys. It signs with its *current* key and verifies with any key it still trusts, so
keys rotate without invalidating what was signed before. Key material never leaves this module
in readable form: ``repr``/``str`` of keys and keyrings show only key ids, and no error message
includes key bytes or MACs computed with them.

Message layout: ``HMAC-SHA256(key, root || 0x00 || key_id || 0x00 || message)``. Binding the trust
root and key id into the MAC means a checkpoint MAC can never be replayed as an approval MAC even
if an operator mistakenly configures the same bytes under two roots.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from hashlib import sha256

from runtime.errors import BadSignatureError, KeyringError, UnknownKeyError

MIN_KEY_BYTES = 32


class TrustRoot(StrEnum):
    """The three separate trust roots named in DESIGN.md section 4."""

    CHECKPOINT = "checkpoint"
    APPROVAL = "approval"
    REVIEWER = "reviewer"


class SecretKey:
    """Opaque HMAC key material (at least 32 bytes). Its repr never shows the bytes."""

    __slots__ = ("_material",)

    def __init__(self, material: bytes) -> None:
        if not isinstance(material, bytes | bytearray) or len(material) < MIN_KEY_BYTES:
            raise KeyringError(f"HMAC keys must be at least {MIN_KEY_BYTES} bytes")
        self._material = bytes(material)

    @classmethod
    def generate(cls) -> SecretKey:
        """A fresh random 32-byte key from the OS CSPRNG."""
        return cls(secrets.token_bytes(MIN_KEY_BYTES))

    @classmethod
    def from_b64(cls, text: str) -> SecretKey:
        """Decode URL-safe or standard base64 key text.

        Raises:
            KeyringError: if the text is not base64 or decodes to fewer than 32 bytes.
        """
        try:
            raw = base64.urlsafe_b64decode(text.strip().replace("+", "-").replace("/", "_") + "==")
        except (ValueError, TypeError):
            raise KeyringError("key is not valid base64") from None
        return cls(raw)

    def to_b64(self) -> str:
        """Base64 text of the key, only for writing a key file; never log the result."""
        return base64.urlsafe_b64encode(self._material).decode("ascii").rstrip("=")

    def mac(self, message: bytes) -> bytes:
        return hmac.new(self._material, message, sha256).digest()

    def __repr__(self) -> str:
        return "SecretKey(<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("SecretKey cannot be pickled")


@dataclass(frozen=True, slots=True)
class Signature:
    """A MAC with the id of the key that made it. ``mac`` is lowercase hex (64 chars)."""

    key_id: str
    mac: str


class Keyring:
    """Named keys of one trust root; signs with ``current_key_id``, verifies with any.

    Args:
        root: the trust root this keyring belongs to.
        keys: mapping ``key_id -> SecretKey``; key ids are 1-64 chars of ``[A-Za-z0-9._-]``.
        current_key_id: the key used for new signatures; must be in ``keys``.

    Raises:
        KeyringError: empty keyring, bad key id or unknown current key id.
    """

    __slots__ = ("root", "_keys", "current_key_id")

    def __init__(self, root: TrustRoot | str, keys: Mapping[str, SecretKey], current_key_id: str):
        self.root = TrustRoot(root)
        if not keys:
            raise KeyringError(f"the {self.root} keyring has no keys")
        for key_id, key in keys.items():
            _check_key_id(key_id)
            if not isinstance(key, SecretKey):
                raise KeyringError(f"key {key_id!r} of the {self.root} keyring is not a SecretKey")
        if current_key_id not in keys:
            raise KeyringError(f"current key id {current_key_id!r} is not in the {self.root} keyring")
        self._keys = dict(keys)
        self.current_key_id = current_key_id

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def _message(self, key_id: str, message: bytes) -> bytes:
        return self.root.value.encode() + b"\x00" + key_id.encode() + b"\x00" + message

    def sign(self, message: bytes) -> Signature:
        """MAC ``message`` (bytes) with the current key."""
        key_id = self.current_key_id
        mac = self._keys[key_id].mac(self._message(key_id, message))
        return Signature(key_id=key_id, mac=mac.hex())

    def verify(self, message: bytes, signature: Signature) -> None:
        """Check ``signature`` over ``message`` in constant time.

        Raises:
            UnknownKeyError: the key id is not trusted by this keyring (includes the key id).
            BadSignatureError: the MAC does not match.
        """
        key = self._keys.get(signature.key_id)
        if key is None:
            raise UnknownKeyError(root=self.root.value, key_id=signature.key_id)
        expected = key.mac(self._message(signature.key_id, message))
        try:
            given = bytes.fromhex(signature.mac)
        except (ValueError, TypeError):
            raise BadSignatureError(root=self.root.value, key_id=signature.key_id) from None
        if not hmac.compare_digest(expected, given):
            raise BadSignatureError(root=self.root.value, key_id=signature.key_id)

    def without(self, key_ids: Iterable[str]) -> Keyring:
        """A copy that no longer trusts ``key_ids`` (retirement). The current key cannot be dropped."""
        drop = set(key_ids)
        return Keyring(self.root, {k: v for k, v in self._keys.items() if k not in drop}, self.current_key_id)

    def __repr__(self) -> str:
        return f"Keyring(root={self.root.value!r}, key_ids={list(self._keys)!r}, current={self.current_key_id!r})"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("Keyring cannot be pickled")


def _check_key_id(key_id: str) -> None:
    if (
        not isinstance(key_id, str)
        or not 1 <= len(key_id) <= 64
        or not all(c.isascii() and (c.isalnum() or c in "._-") for c in key_id)
    ):
        raise KeyringError(f"invalid key id {key_id!r:.70}: use 1-64 chars of A-Z a-z 0-9 . _ -")


def parse_keyring_spec(root: TrustRoot | str, spec: str) -> Keyring:
    """Parse ``"kid1:BASE64,kid2:BASE64"`` (first entry is current) into a keyring.

    This is the format of the ``RATCHET_<ROOT>_KEYS`` environment variables.

    Raises:
        KeyringError: malformed entry, duplicate key id or short key. Messages name the entry
            index and key id, never the key text.
    """
    keys: dict[str, SecretKey] = {}
    first: str | None = None
    for index, entry in enumerate(p for p in spec.split(",") if p.strip()):
        key_id, sep, b64 = entry.strip().partition(":")
        if not sep or not key_id or not b64:
            raise KeyringError(f"{TrustRoot(root)} key entry #{index + 1} is not KEY_ID:BASE64")
        if key_id in keys:
            raise KeyringError(f"{TrustRoot(root)} key id {key_id!r} appears twice")
        try:
            keys[key_id] = SecretKey.from_b64(b64)
        except KeyringError as exc:
            raise KeyringError(f"{TrustRoot(root)} key {key_id!r}: {exc.message}") from None
        first = first or key_id
    if first is None:
        raise KeyringError(f"no {TrustRoot(root)} keys given")
    return Keyring(root, keys, first)
