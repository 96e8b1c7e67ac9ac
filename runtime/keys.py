"""Where keyrings come from: environment variables or a key file outside the repository.

Lookup order for each trust root (``checkpoint``, ``approval``, ``reviewer``):

1. ``RATCHET_<ROOT>_KEYS="kid:BASE64[,kid:BASE64...]"`` (first entry signs; all verify).
2. The key file ``RATCHET_KEY_FILE`` (default ``var/keys.json``), JSON of the form
   ``{"checkpoint": {"current": "kid", "keys": {"kid": "BASE64"}}, ...}``. On the embedded
   default the file is created on first use with mode 0600 (``RATCHET_CREATE_KEY_FILE``).

Key bytes are never logged, printed or put in an error message (DESIGN.md section 4).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from django.conf import settings

from runtime.core.signing import Keyring, SecretKey, TrustRoot, parse_keyring_spec
from runtime.errors import KeyringError


def _env_name(root: TrustRoot) -> str:
    return f"RATCHET_{root.value.upper()}_KEYS"


def _create_key_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        root.value: {"current": f"{root.value}-{secrets.token_hex(4)}", "keys": {}} for root in TrustRoot
    }
    for entry in data.values():
        entry["keys"][entry["current"]] = SecretKey.generate().to_b64()
    # O_EXCL: two processes starting at once must not both write (and disagree on) the keys.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())


def _from_file(root: TrustRoot, path: Path) -> Keyring:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise KeyringError(f"key file for the {root} trust root does not exist", path=str(path.name)) from None
    except (OSError, ValueError):
        raise KeyringError("key file is unreadable or not JSON", path=str(path.name)) from None
    entry = data.get(root.value) if isinstance(data, dict) else None
    if not isinstance(entry, dict) or not isinstance(entry.get("keys"), dict):
        raise KeyringError(f"key file has no {root} section with keys")
    keys: dict[str, SecretKey] = {}
    for key_id, text in entry["keys"].items():
        if not isinstance(text, str):
            raise KeyringError(f"{root} key {key_id!r} in the key file is not base64 text")
        try:
            keys[key_id] = SecretKey.from_b64(text)
        except KeyringError as exc:
            raise KeyringError(f"{root} key {key_id!r} in the key file: {exc.message}") from None
    return Keyring(root, keys, str(entry.get("current")))


def keyring_for(root: TrustRoot | str, *, create: bool | None = None) -> Keyring:
    """The keyring of one trust root.

    Args:
        root: ``TrustRoot`` or its name.
        create: create the embedded key file if missing; defaults to ``RATCHET_CREATE_KEY_FILE``.

    Raises:
        KeyringError: no keys configured for the root, or the configuration is malformed.
    """
    root = TrustRoot(root)
    spec = os.environ.get(_env_name(root))
    if spec:
        return parse_keyring_spec(root, spec)
    path = Path(settings.RATCHET_KEY_FILE)
    if create is None:
        create = settings.RATCHET_CREATE_KEY_FILE
    if create and not path.exists():
        _create_key_file(path)
    return _from_file(root, path)
