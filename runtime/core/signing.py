"""Keyrings, HMAC-SHA256 and Ed25519 signing with key ids (DESIGN.md section 4.1).

A :class:`Keyring` belongs to one trust root (checkpoints, approvals, reviewer decisions or
evidence-bundle exports) and holds named keys. The checkpoint root is symmetric (HMAC-SHA256,
between the runtime and itself); the other roots are asymmetric (Ed25519): a signer holds the
32-byte private seed as a :class:`SecretKey`, a verifier holds only a :class:`PublicKey`, so a
process given the public keys of the approval and reviewer roots can check but never mint
approvals or decisions (DESIGN.md section 2.2).

Over 400 lines: the two kinds of key and the one keyring that holds either belong together.
It signs with its *current* key and verifies with any key it still trusts, so keys rotate without
invalidating what was signed before. Key material never leaves this module in readable form:
``repr``/``str`` of keys and keyrings show only key ids, and no error message includes key bytes or
MACs computed with them.

Message layout: ``HMAC-SHA256(key, root || 0x00 || key_id || 0x00 || message)``, and for the
asymmetric roots ``Ed25519(seed, root || 0x00 || key_id || 0x00 || message)``. Binding the trust
root and key id into what is signed means a signature of one root can never be replayed under
another even if an operator mistakenly configures the same bytes under two roots.
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

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from runtime.errors import BadSignatureError, KeyringError, UnknownKeyError

MIN_KEY_BYTES = 32
"""Shortest accepted HMAC key, in bytes (the SHA-256 output size)."""

MAC_RE = re.compile(r"^[0-9a-f]{64}$")
"""The only accepted spelling of a MAC: 64 lowercase hex characters, nothing else."""

ED25519_SIG_RE = re.compile(r"^[0-9a-f]{128}$")
"""The only accepted spelling of an Ed25519 signature: 128 lowercase hex characters."""

_KEY_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_B64_TEXT_RE = re.compile(r"^[A-Za-z0-9+/_=-]+$")


class TrustRoot(StrEnum):
    """The separate trust roots named in DESIGN.md section 4.1."""

    CHECKPOINT = "checkpoint"
    APPROVAL = "approval"
    REVIEWER = "reviewer"
    EXPORT = "export"

    @property
    def asymmetric(self) -> bool:
        """True for the Ed25519 roots (everything but the checkpoint root)."""
        return self is not TrustRoot.CHECKPOINT


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
        return cls(_b64_decode(text, what="key"))

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

    def _ed25519(self) -> Ed25519PrivateKey:
        # The 32-byte material is the Ed25519 private seed for the asymmetric roots.
        if len(self._material) != 32:
            raise KeyringError("an Ed25519 private key (seed) is exactly 32 bytes")
        return Ed25519PrivateKey.from_private_bytes(self._material)

    def ed25519_sign(self, message: bytes) -> bytes:
        """Raw 64-byte Ed25519 signature of ``message`` with this seed. Prefer :meth:`Keyring.sign`."""
        return self._ed25519().sign(message)

    def __repr__(self) -> str:
        return "SecretKey(<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("SecretKey cannot be pickled")


class PublicKey:
    """An Ed25519 public key (32 bytes) of an asymmetric trust root. Not secret: it may be printed,
    exported and handed to an auditor; it verifies and never signs."""

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes) -> None:
        if not isinstance(raw, bytes | bytearray) or len(raw) != 32:
            raise KeyringError("an Ed25519 public key is exactly 32 bytes")
        self._raw = bytes(raw)

    @classmethod
    def from_b64(cls, text: str) -> PublicKey:
        """Decode base64 public-key text (any alphabet, padded or not).

        Raises:
            KeyringError: not base64 or not 32 bytes.
        """
        return cls(_b64_decode(text, what="public key"))

    @classmethod
    def of(cls, secret: SecretKey) -> PublicKey:
        """The public half of an Ed25519 seed."""
        return cls(secret._ed25519().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))

    def to_b64(self) -> str:
        """URL-safe base64 without padding (the form key files and ``*_PUBLIC_KEYS`` hold)."""
        return base64.urlsafe_b64encode(self._raw).decode("ascii").rstrip("=")

    def verify(self, signature: bytes, message: bytes) -> bool:
        """True if ``signature`` (64 bytes) is this key's Ed25519 signature of ``message``."""
        try:
            Ed25519PublicKey.from_public_bytes(self._raw).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublicKey) and other._raw == self._raw

    def __hash__(self) -> int:
        return hash(self._raw)

    def __repr__(self) -> str:
        return f"PublicKey({self.to_b64()})"


def _b64_decode(text: str, *, what: str) -> bytes:
    if not isinstance(text, str):
        raise KeyringError(f"{what} text must be a base64 string")
    body = text.strip().replace("+", "-").replace("/", "_").rstrip("=")
    if not body or not _B64_TEXT_RE.match(body) or "=" in body:
        raise KeyringError(f"{what} is not valid base64")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise KeyringError(f"{what} is not valid base64") from None


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
        keys: mapping ``key_id -> SecretKey | PublicKey``; key ids are 1-64 chars of
            ``[A-Za-z0-9._-]``. The checkpoint root takes only ``SecretKey`` (HMAC keys); the
            asymmetric roots take ``SecretKey`` (a 32-byte Ed25519 seed: signs and verifies) or
            ``PublicKey`` (verifies only).
        current_key_id: the key used for new signatures; must be in ``keys``.

    Raises:
        KeyringError: unknown trust root, empty keyring, bad key id, unknown current key id, or
            a key of the wrong kind for the root.

    A keyring is immutable: rotating means building a new one (or :meth:`without`), so a
    keyring shared between threads never changes which key signs halfway through.
    """

    __slots__ = ("root", "_keys", "current_key_id")

    root: TrustRoot
    current_key_id: str

    def __init__(self, root: TrustRoot | str, keys: Mapping[str, SecretKey | PublicKey],
                 current_key_id: str):
        try:
            trust_root = TrustRoot(root)
        except ValueError:
            raise KeyringError(f"unknown trust root {root!r:.40}") from None
        if not keys:
            raise KeyringError(f"the {trust_root} keyring has no keys")
        for key_id, key in keys.items():
            _check_key_id(key_id)
            if isinstance(key, PublicKey) and trust_root.asymmetric:
                continue
            if not isinstance(key, SecretKey):
                raise KeyringError(f"key {key_id!r} of the {trust_root} keyring is not a SecretKey")
            if trust_root.asymmetric and len(key._material) != 32:
                raise KeyringError(f"key {key_id!r} of the {trust_root} keyring is not a 32-byte Ed25519 seed")
        for key_id in keys:
            # The id is printed in reprs and errors; refuse one that *is* a key's text (the two
            # halves of a configuration entry swapped), without repeating it.
            if _looks_like_key_text(key_id) and any(
                isinstance(k, SecretKey) and k._is_text_of(key_id) for k in keys.values()
            ):
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

    @property
    def can_sign(self) -> bool:
        """True if the current key is private (a public-only keyring only verifies)."""
        return isinstance(self._keys[self.current_key_id], SecretKey)

    def public_keys(self) -> dict[str, PublicKey]:
        """``key_id -> PublicKey`` of an asymmetric root's keyring (safe to export).

        Raises:
            KeyringError: the checkpoint root has no public keys (it is symmetric).
        """
        if not self.root.asymmetric:
            raise KeyringError(f"the {self.root} trust root is symmetric and has no public keys")
        return {k: v if isinstance(v, PublicKey) else PublicKey.of(v) for k, v in self._keys.items()}

    def public(self) -> Keyring:
        """A copy holding only public keys: verifies everything this keyring does, signs nothing."""
        return Keyring(self.root, self.public_keys(), self.current_key_id)

    def _message(self, key_id: str, message: bytes) -> bytes:
        return self.root.value.encode() + b"\x00" + key_id.encode() + b"\x00" + message

    def sign(self, message: bytes) -> Signature:
        """Sign ``message`` (bytes) with the current key: an HMAC for the checkpoint root, an
        Ed25519 signature (128 hex chars) for the others.

        What is signed is ``root || 0x00 || key_id || 0x00 || message``, so a signature cannot
        verify under another trust root or another key id (DESIGN.md section 4.1).

        Raises:
            KeyringError: the current key is public only (this process cannot sign for the root).
        """
        key_id = self.current_key_id
        key = self._keys[key_id]
        if not isinstance(key, SecretKey):
            raise KeyringError(
                f"this process holds only the public keys of the {self.root} trust root and "
                f"cannot sign for it", root=self.root.value, key_id=key_id)
        data = self._message(key_id, _as_bytes(message))
        if self.root.asymmetric:
            return Signature(key_id=key_id, mac=key.ed25519_sign(data).hex())
        return Signature(key_id=key_id, mac=key.mac(data).hex())

    def verify(self, message: bytes, signature: Signature) -> None:
        """Check ``signature`` over ``message`` (constant time for HMACs).

        Raises:
            UnknownKeyError: the key id is not trusted by this keyring (includes the key id,
                shortened if it is not a well-formed id).
            BadSignatureError: the signature does not match, or is not exactly 64 (HMAC) or 128
                (Ed25519) lowercase hex characters (``bytes.fromhex`` alone would also take upper
                case and spaces, which would let a stored signature change spelling and verify).
        """
        key_id = signature.key_id
        key = self._keys.get(key_id) if isinstance(key_id, str) else None
        if key is None:
            raise UnknownKeyError(root=self.root.value, key_id=_show_key_id(key_id))
        data = self._message(key_id, _as_bytes(message))
        if self.root.asymmetric:
            if not isinstance(signature.mac, str) or not ED25519_SIG_RE.match(signature.mac):
                raise BadSignatureError("signature is malformed", root=self.root.value, key_id=key_id)
            public = key if isinstance(key, PublicKey) else PublicKey.of(key)
            if not public.verify(bytes.fromhex(signature.mac), data):
                raise BadSignatureError(
                    "signature does not verify: the data was altered or signed with another key",
                    root=self.root.value, key_id=key_id)
            return
        if not isinstance(signature.mac, str) or not MAC_RE.match(signature.mac):
            raise BadSignatureError("MAC is malformed", root=self.root.value, key_id=key_id)
        if not hmac.compare_digest(key.mac(data), bytes.fromhex(signature.mac)):
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


def parse_keyring_spec(root: TrustRoot | str, spec: str, *, public: bool = False) -> Keyring:
    """Parse ``"kid1:BASE64,kid2:BASE64"`` (first entry is current) into a keyring.

    This is the format of the ``RATCHET_<ROOT>_KEYS`` environment variables (private keys) and,
    with ``public=True``, of ``RATCHET_<ROOT>_PUBLIC_KEYS`` (Ed25519 public keys of an asymmetric
    root, DESIGN.md section 4.1). A key id that could
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
    if public and not trust_root.asymmetric:
        raise KeyringError(f"the {trust_root} trust root is symmetric and has no public keys")
    keys: dict[str, SecretKey | PublicKey] = {}
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
            keys[key_id] = PublicKey.from_b64(b64) if public else SecretKey.from_b64(b64)
        except KeyringError as exc:
            raise KeyringError(f"{where} ({key_id!r}): {exc.message}") from None
        first = first or key_id
    if first is None:
        raise KeyringError(f"no {trust_root} keys given")
    return Keyring(trust_root, keys, first)
