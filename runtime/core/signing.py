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
import binascii
import hmac
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from hashlib import sha256

from runtime.errors import BadSignatureError, KeyringError, UnknownKeyError

MIN_KEY_BYTES = 32
"""Shortest accepted HMAC key, in bytes (the SHA-256 output size)."""

MAC_RE = re.compile(r"^[0-9a-f]{64}$")
"""The only accepted spelling of a MAC: 64 lowercase hex characters, nothing else."""

_KEY_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_B64_TEXT_RE = re.compile(r"^[A-Za-z0-9+/_=-]+$")


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
        """Decode URL-safe or standard base64 key text, padded or not.

        Every character must belong to the base64 alphabet: the stdlib decoder would otherwise
        skip stray characters silently and a mangled key would load as a different key.

        Raises:
            KeyringError: if the text is not base64 or decodes to fewer than 32 bytes. The
                message never repeats the text.
        """
        if not isinstance(text, str):
            raise KeyringError("key text must be a base64 string")
        body = text.strip().replace("+", "-").replace("/", "_").rstrip("=")
        if not body or not _B64_TEXT_RE.match(body) or "=" in body:
            raise KeyringError("key is not valid base64")
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            raise KeyringError("key is not valid base64") from None
        return cls(raw)

    def to_b64(self) -> str:
        """Base64 text of the key, only for writing a key file; never log the result."""
        return base64.urlsafe_b64encode(self._material).decode("ascii").rstrip("=")

    def _is_text_of(self, text: str) -> bool:
        """True if ``text`` is this key's base64 (any alphabet or padding). Constant time."""
        try:
            other = SecretKey.from_b64(text)
        except KeyringError:
            return False
        return hmac.compare_digest(other._material, self._material)

    def mac(self, message: bytes) -> bytes:
        """Raw 32-byte HMAC-SHA256 of ``message``. Prefer :meth:`Keyring.sign`, which binds the
        trust root and key id into the message."""
        return hmac.new(self._material, message, sha256).digest()

    def __repr__(self) -> str:
        return "SecretKey(<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("SecretKey cannot be pickled")


@dataclass(frozen=True, slots=True)
class Signature:
    """A MAC with the id of the key that made it. ``mac`` is lowercase hex (64 chars).

    Not validated on construction because signatures are read from untrusted storage;
    :meth:`Keyring.verify` rejects anything malformed as a bad signature.
    """

    key_id: str
    mac: str


class Keyring:
    """Named keys of one trust root; signs with ``current_key_id``, verifies with any.

    Args:
        root: the trust root this keyring belongs to.
        keys: mapping ``key_id -> SecretKey``; key ids are 1-64 chars of ``[A-Za-z0-9._-]``.
        current_key_id: the key used for new signatures; must be in ``keys``.

    Raises:
        KeyringError: unknown trust root, empty keyring, bad key id or unknown current key id.

    A keyring is immutable: rotating means building a new one (or :meth:`without`), so a
    keyring shared between threads never changes which key signs halfway through.
    """

    __slots__ = ("root", "_keys", "current_key_id")

    root: TrustRoot
    current_key_id: str

    def __init__(self, root: TrustRoot | str, keys: Mapping[str, SecretKey], current_key_id: str):
        try:
            trust_root = TrustRoot(root)
        except ValueError:
            raise KeyringError(f"unknown trust root {root!r:.40}") from None
        if not keys:
            raise KeyringError(f"the {trust_root} keyring has no keys")
        for key_id, key in keys.items():
            _check_key_id(key_id)
            if not isinstance(key, SecretKey):
                raise KeyringError(f"key {key_id!r} of the {trust_root} keyring is not a SecretKey")
        for key_id in keys:
            # The id is printed in reprs and errors; refuse one that *is* a key's text (the two
            # halves of a configuration entry swapped), without repeating it.
            if _looks_like_key_text(key_id) and any(k._is_text_of(key_id) for k in keys.values()):
                raise KeyringError(f"a key id of the {trust_root} keyring is the text of a key")
        if not isinstance(current_key_id, str) or current_key_id not in keys:
            shown = _show_key_id(current_key_id)
            raise KeyringError(f"current key id {shown!r} is not in the {trust_root} keyring")
        object.__setattr__(self, "root", trust_root)
        object.__setattr__(self, "_keys", dict(keys))
        object.__setattr__(self, "current_key_id", current_key_id)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Keyring is immutable; build a new one to rotate keys")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Keyring is immutable; build a new one to rotate keys")

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def _message(self, key_id: str, message: bytes) -> bytes:
        return self.root.value.encode() + b"\x00" + key_id.encode() + b"\x00" + message

    def sign(self, message: bytes) -> Signature:
        """MAC ``message`` (bytes) with the current key.

        The MAC covers ``root || 0x00 || key_id || 0x00 || message`` so it cannot verify under
        another trust root or another key id (DESIGN.md section 4, three separate trust roots).
        """
        key_id = self.current_key_id
        mac = self._keys[key_id].mac(self._message(key_id, _as_bytes(message)))
        return Signature(key_id=key_id, mac=mac.hex())

    def verify(self, message: bytes, signature: Signature) -> None:
        """Check ``signature`` over ``message`` in constant time.

        Raises:
            UnknownKeyError: the key id is not trusted by this keyring (includes the key id,
                shortened if it is not a well-formed id).
            BadSignatureError: the MAC does not match, or is not exactly 64 lowercase hex
                characters (``bytes.fromhex`` alone would also take upper case and spaces, which
                would let a stored MAC change spelling and still verify).
        """
        key_id = signature.key_id
        key = self._keys.get(key_id) if isinstance(key_id, str) else None
        if key is None:
            raise UnknownKeyError(root=self.root.value, key_id=_show_key_id(key_id))
        data = _as_bytes(message)
        if not isinstance(signature.mac, str) or not MAC_RE.match(signature.mac):
            raise BadSignatureError("MAC is malformed", root=self.root.value, key_id=key_id)
        expected = key.mac(self._message(key_id, data))
        if not hmac.compare_digest(expected, bytes.fromhex(signature.mac)):
            raise BadSignatureError(root=self.root.value, key_id=key_id)

    def trusts(self, key_id: str) -> bool:
        """True if ``key_id`` is one of the keys this keyring verifies with."""
        return isinstance(key_id, str) and key_id in self._keys

    def without(self, key_ids: Iterable[str]) -> Keyring:
        """A copy that no longer trusts ``key_ids`` (retirement).

        Raises:
            KeyringError: ``key_ids`` includes the current key, which cannot be dropped.
        """
        drop = set(key_ids)
        kept = {k: v for k, v in self._keys.items() if k not in drop}
        return Keyring(self.root, kept, self.current_key_id)

    def __repr__(self) -> str:
        return (
            f"Keyring(root={self.root.value!r}, key_ids={list(self._keys)!r}, "
            f"current={self.current_key_id!r})"
        )

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("Keyring cannot be pickled")


def _as_bytes(message: bytes) -> bytes:
    # A str would be signed under some implicit encoding; only the exact bytes are signed.
    if not isinstance(message, bytes | bytearray | memoryview):
        raise TypeError(f"only bytes are signed, not {type(message).__name__}")
    return bytes(message)


def _looks_like_key_text(text: str) -> bool:
    """True if ``text`` could be base64 of a key (43+ chars, i.e. 32+ bytes); never echoed."""
    return len(text) >= 43 and bool(_B64_TEXT_RE.match(text))


def _show_key_id(key_id: object) -> str:
    """How a key id appears in messages: as is if well formed, otherwise described only.

    A malformed "key id" is often key text pasted in the wrong place (``BASE64:kid`` instead of
    ``kid:BASE64``), so it is never repeated.
    """
    if isinstance(key_id, str) and _KEY_ID_RE.match(key_id) and not _looks_like_key_text(key_id):
        return key_id
    if isinstance(key_id, str):
        return f"<unprintable key id of {len(key_id)} chars>"
    return f"<key id of type {type(key_id).__name__}>"


def _check_key_id(key_id: str) -> None:
    if not isinstance(key_id, str) or not _KEY_ID_RE.match(key_id):
        raise KeyringError(
            f"invalid key id {_show_key_id(key_id)!r}: use 1-64 chars of A-Z a-z 0-9 . _ -"
        )


def parse_keyring_spec(root: TrustRoot | str, spec: str) -> Keyring:
    """Parse ``"kid1:BASE64,kid2:BASE64"`` (first entry is current) into a keyring.

    This is the format of the ``RATCHET_<ROOT>_KEYS`` environment variables. A key id that could
    itself be key text (43+ base64 characters) is refused, so swapped halves are caught.

    Raises:
        KeyringError: malformed entry, duplicate key id or short key. Messages name the entry
            index and, when it is a well-formed id, the key id; never the key text, even when
            the two halves of an entry were swapped.
    """
    try:
        trust_root = TrustRoot(root)
    except ValueError:
        raise KeyringError(f"unknown trust root {root!r:.40}") from None
    if not isinstance(spec, str):
        raise KeyringError(f"{trust_root} key spec must be a string")
    keys: dict[str, SecretKey] = {}
    first: str | None = None
    for index, entry in enumerate(p for p in spec.split(",") if p.strip()):
        where = f"{trust_root} key entry #{index + 1}"
        key_id, sep, b64 = entry.strip().partition(":")
        if not sep or not key_id or not b64:
            raise KeyringError(f"{where} is not KEY_ID:BASE64")
        if not _KEY_ID_RE.match(key_id) or _looks_like_key_text(key_id):
            raise KeyringError(
                f"{where}: the key id {_show_key_id(key_id)!r} is not a short id; "
                "the format is KEY_ID:BASE64 (were the halves swapped?)"
            )
        if key_id in keys:
            raise KeyringError(f"{where}: key id {key_id!r} appears twice")
        try:
            keys[key_id] = SecretKey.from_b64(b64)
        except KeyringError as exc:
            raise KeyringError(f"{where} ({key_id!r}): {exc.message}") from None
        first = first or key_id
    if first is None:
        raise KeyringError(f"no {trust_root} keys given")
    return Keyring(trust_root, keys, first)
