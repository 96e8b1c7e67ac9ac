"""Test key material in every form a leak could take (DESIGN.md section 4.1: never printed).

A ``TestKey`` is the private key of its root: the HMAC key of the checkpoint root, the Ed25519
seed of the asymmetric roots (approval, reviewer, export), whose public half verifiers hold."""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass

from runtime.core.signing import PublicKey, SecretKey, TrustRoot


@dataclass(frozen=True)
class TestKey:
    """A key a test configured through ``RATCHET_<ROOT>_KEYS``."""

    __test__ = False  # not a test class, despite the name

    root: str
    key_id: str
    raw: bytes

    @property
    def b64(self) -> str:
        """URL-safe base64 without padding: the form ``RATCHET_<ROOT>_KEYS`` holds."""
        return base64.urlsafe_b64encode(self.raw).decode().rstrip("=")

    @property
    def spec(self) -> str:
        """``KEY_ID:BASE64``, one entry of ``RATCHET_<ROOT>_KEYS``."""
        return f"{self.key_id}:{self.b64}"

    @property
    def asymmetric(self) -> bool:
        return TrustRoot(self.root).asymmetric

    @property
    def public_b64(self) -> str:
        """The Ed25519 public key (base64) of an asymmetric root's key; not secret."""
        return PublicKey.of(SecretKey(self.raw)).to_b64()

    @property
    def public_spec(self) -> str:
        """``KEY_ID:PUBLIC_BASE64``, one entry of ``RATCHET_<ROOT>_PUBLIC_KEYS``."""
        return f"{self.key_id}:{self.public_b64}"

    def leak_forms(self) -> list[bytes]:
        """Byte strings whose presence anywhere means the key leaked."""
        return [
            self.raw,
            self.b64.encode(),
            base64.b64encode(self.raw).decode().rstrip("=").encode(),
            self.raw.hex().encode(),
        ]


def make_test_key(root: TrustRoot | str, key_id: str) -> TestKey:
    """A fresh random 32-byte key for ``root`` under ``key_id``."""
    return TestKey(root=TrustRoot(root).value, key_id=key_id, raw=secrets.token_bytes(32))
