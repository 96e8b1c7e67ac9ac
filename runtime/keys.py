"""Where keyrings come from: environment variables or a key file outside the repository.

Four trust roots (DESIGN.md section 4.1): ``checkpoint`` (HMAC, symmetric) and the Ed25519 roots
``approval``, ``reviewer`` and ``export``. A process that *signs* for an asymmetric root holds its
private seed; a process that only *verifies* (a worker) holds its public keys and cannot mint.

Lookup order for each root:

1. ``RATCHET_<ROOT>_KEYS="kid:BASE64[,kid:BASE64...]"``: private keys (first entry signs; all
   verify). For the checkpoint root these are the HMAC keys.
2. ``RATCHET_<ROOT>_PUBLIC_KEYS="kid:BASE64[,...]"``: Ed25519 public keys; when set, verification
   uses exactly these (a worker is configured with these and no private key).
3. The key file ``RATCHET_KEY_FILE`` (default ``var/keys.json``), JSON of the form
   ``{"checkpoint": {"current": "kid", "keys": {"kid": "BASE64"}}, "approval": {"current": "kid",
   "keys": {"kid": "SEED"}, "public": {"kid": "PUBLIC"}}, "reviewer": {..., "names": {"kid":
   "alice"}}, "export": {...}}``. A section without ``keys`` verifies only. On the embedded default
   the file is created on first use with mode 0600 (``RATCHET_CREATE_KEY_FILE``), and a root
   missing from an older file is added.

A reviewer's own key is bound to that reviewer by name, in every key source: the key file's
``reviewer.names`` and ``RATCHET_REVIEWER_KEY_NAMES="kid:name[,kid:name...]"`` for keys that
come from the environment (:func:`reviewer_names`). A decision signed with a bound key must name
that reviewer (DESIGN.md section 6.3).

Private key bytes are never logged, printed or put in an error message (DESIGN.md section 4.1).

Over 400 lines: every way key material enters or leaves a process (the environment, the key
file, reviewer key files, the public-key document, an agent process's environment) stays in this
one module, so what touches key bytes can be audited in one place.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from runtime.core.signing import Keyring, PublicKey, SecretKey, TrustRoot, parse_keyring_spec
from runtime.errors import KeyringError

PUBLIC_KEYS_FORMAT = "ratchet-public-keys/1"
"""``format`` of a public-key file handed to an auditor (``manage.py keys export-public``)."""

REVIEWER_KEY_FORMAT = "ratchet-reviewer-key/1"
"""``format`` of one reviewer's own private key file (``manage.py keys reviewer-add``)."""


def _env_name(root: TrustRoot) -> str:
    return f"RATCHET_{root.value.upper()}_KEYS"


def _public_env_name(root: TrustRoot) -> str:
    return f"RATCHET_{root.value.upper()}_PUBLIC_KEYS"


def _new_section(root: TrustRoot) -> dict[str, Any]:
    key_id = f"{root.value}-{secrets.token_hex(4)}"
    secret = SecretKey.generate()
    section: dict[str, Any] = {"current": key_id, "keys": {key_id: secret.to_b64()}}
    if root.asymmetric:
        section["public"] = {key_id: PublicKey.of(secret).to_b64()}
    return section


def _write_private(path: Path, data: dict[str, Any], *, exclusive: bool) -> bool:
    """Write ``data`` as JSON with mode 0600; False if ``exclusive`` and the file exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if exclusive:
        # O_EXCL: two processes starting at once must not both write (and disagree on) the keys.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        target = path
    else:
        target = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    if target != path:
        os.replace(target, path)
    return True


def _create_key_file(path: Path) -> None:
    _write_private(path, {root.value: _new_section(root) for root in TrustRoot}, exclusive=True)


@contextmanager
def _locked(path: Path) -> Any:
    """Serialise read-modify-write of the key file between processes (a lock file beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key_file_update(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    with _locked(path):
        data = _read_file(path)
        change(data)
        _write_private(path, data, exclusive=False)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise KeyringError("key file does not exist", path=str(path.name)) from None
    except (OSError, ValueError, RecursionError):
        raise KeyringError("key file is unreadable or not JSON", path=str(path.name)) from None
    if not isinstance(data, dict):
        raise KeyringError("key file is not a JSON object", path=str(path.name))
    return data


def _section_keyring(root: TrustRoot, entry: Any, *, private: bool) -> Keyring | None:
    """The private (``private``) or verifying keyring a key-file section describes, or None."""
    if not isinstance(entry, dict):
        return None
    keys: dict[str, SecretKey | PublicKey] = {}
    sources = ["keys"] if private else (["public"] if root.asymmetric else []) + ["keys"]
    for source in sources:
        table = entry.get(source, {})
        if not isinstance(table, dict):
            raise KeyringError(f"the {root} section of the key file has a malformed {source!r}")
        for key_id, text in table.items():
            if key_id in keys:
                continue
            if not isinstance(text, str):
                raise KeyringError(f"{root} key {key_id!r} in the key file is not base64 text")
            try:
                if source == "public":
                    keys[key_id] = PublicKey.from_b64(text)
                else:
                    keys[key_id] = SecretKey.from_b64(text)
            except KeyringError as exc:
                raise KeyringError(f"{root} key {key_id!r} in the key file: {exc.message}") from None
    if not keys:
        return None
    current = entry.get("current")
    if current not in keys:
        current = next(iter(keys))
    ring = Keyring(root, keys, str(current))
    return ring if private or not root.asymmetric else ring.public()


def _from_file(root: TrustRoot, path: Path, *, private: bool, create: bool) -> Keyring:
    data = _read_file(path)
    # Only an asymmetric root (the export root a pre-Ed25519 file lacks) is added to an existing
    # file: a new checkpoint key there would orphan every checkpoint already signed.
    if root.value not in data and create and not private and root.asymmetric:
        _key_file_update(path, lambda d: d.setdefault(root.value, _new_section(root)))
        data = _read_file(path)
    ring = _section_keyring(root, data.get(root.value), private=private)
    if ring is None:
        if private:
            raise KeyringError(
                f"this process holds no private {root} key: only the process that owns the "
                f"{root} trust root signs for it", root=root.value)
        raise KeyringError(f"key file has no {root} section with keys")
    return ring


def _key_file(create: bool | None) -> tuple[Path, bool]:
    path = Path(settings.RATCHET_KEY_FILE)
    if create is None:
        create = settings.RATCHET_CREATE_KEY_FILE
    if create and not path.exists():
        _create_key_file(path)
    return path, bool(create)


def keyring_for(root: TrustRoot | str, *, create: bool | None = None) -> Keyring:
    """The keyring that *verifies* for one trust root.

    For the checkpoint root this is the HMAC keyring (it also seals). For an asymmetric root it
    holds public keys only, whatever the process was given, so verifying code never handles a
    private key (DESIGN.md section 4.1).

    Args:
        root: ``TrustRoot`` or its name.
        create: create the embedded key file if missing; defaults to ``RATCHET_CREATE_KEY_FILE``.

    Raises:
        KeyringError: no keys configured for the root, or the configuration is malformed.
    """
    root = TrustRoot(root)
    if root.asymmetric:
        public_spec = os.environ.get(_public_env_name(root))
        if public_spec:
            return parse_keyring_spec(root, public_spec, public=True)
    spec = os.environ.get(_env_name(root))
    if spec:
        ring = parse_keyring_spec(root, spec)
        return ring.public() if root.asymmetric else ring
    path, create = _key_file(create)
    return _from_file(root, path, private=False, create=create)


def signer_for(root: TrustRoot | str, *, create: bool | None = None) -> Keyring:
    """The private keyring that *signs* for an asymmetric root (approval service, reviewer
    role, bundle export). A worker configured with public keys only gets a ``KeyringError``.

    Raises:
        KeyringError: this process holds no private key of ``root`` (a worker, or an agent
            process: DESIGN.md section 2.4), or the configuration is malformed (DESIGN.md
            section 4.1).
    """
    root = TrustRoot(root)
    if root.asymmetric and settings.RATCHET_PROCESS_ROLE == "agent":
        # Settings already refuse to start an agent process with a private key in its
        # environment; this keeps it from ever reading one from the key file either.
        raise KeyringError(f"this process serves agents (RATCHET_PROCESS_ROLE=agent) and signs nothing for "
                           f"the {root} root: decide on the dashboard's process", root=root.value)
    spec = os.environ.get(_env_name(root))
    if spec:
        return parse_keyring_spec(root, spec)
    if root.asymmetric and os.environ.get(_public_env_name(root)):
        raise KeyringError(f"this process holds only the public {root} keys and cannot sign for it",
                           root=root.value)
    path, create = _key_file(create)
    return _from_file(root, path, private=True, create=create)


REVIEWER_NAMES_ENV = "RATCHET_REVIEWER_KEY_NAMES"
"""``kid:name[,kid:name...]``: reviewer keys from the environment, each bound to one person."""


def _names_from_env() -> dict[str, str]:
    names: dict[str, str] = {}
    for index, entry in enumerate(p for p in os.environ.get(REVIEWER_NAMES_ENV, "").split(",") if p.strip()):
        key_id, sep, name = entry.strip().partition(":")
        if not sep or not key_id or not _is_reviewer_name(name):
            raise KeyringError(f"{REVIEWER_NAMES_ENV} entry #{index + 1} is not kid:reviewer-name")
        if names.get(key_id, name) != name:
            raise KeyringError(f"{REVIEWER_NAMES_ENV} binds key {key_id} to two reviewers")
        names[key_id] = name
    return names


def _is_reviewer_name(name: str) -> bool:
    return bool(name) and len(name) <= 64 and all(c.isalnum() or c in "._-@" for c in name)


def reviewer_names(*, path: Path | None = None) -> dict[str, str]:
    """``key_id -> reviewer name`` for reviewer keys bound to one person (their own key).

    From ``RATCHET_REVIEWER_KEY_NAMES`` (keys configured through the environment, the production
    shape) and from the key file's ``reviewer.names`` (or the public-key file ``path`` an auditor
    was given); empty when neither binds a key. A decision signed with a bound key must name
    that reviewer (DESIGN.md section 6.3).

    Raises:
        KeyringError: the variable is malformed, or it and the file bind one key to two
            reviewers (failing closed: which one signed cannot be told).
    """
    bound = _names_from_env() if path is None else {}
    source = path or Path(settings.RATCHET_KEY_FILE)
    try:
        data = _read_file(source)
    except KeyringError:
        return bound
    names = (data.get(TrustRoot.REVIEWER.value) or {}).get("names", {})
    if isinstance(names, dict):
        for key_id, name in names.items():
            if not (isinstance(key_id, str) and isinstance(name, str)):
                continue
            if bound.get(key_id, name) != name:
                raise KeyringError(f"reviewer key {key_id} is bound to two reviewers ({REVIEWER_NAMES_ENV} "
                                   "and the key file)")
            bound[key_id] = name
    return bound


def public_keys_document() -> dict[str, Any]:
    """The public keys of every asymmetric root as JSON, for an auditor (no private key, no
    checkpoint key). ``manage.py keys export-public`` writes it; ``verify_bundle --public-keys``
    reads it (DESIGN.md section 4.8).

    Raises:
        KeyringError: a root has no keys configured.
    """
    doc: dict[str, Any] = {"format": PUBLIC_KEYS_FORMAT}
    for root in TrustRoot:
        if not root.asymmetric:
            continue
        ring = keyring_for(root)
        doc[root.value] = {"current": ring.current_key_id,
                           "public": {k: v.to_b64() for k, v in ring.public_keys().items()}}
    names = reviewer_names()
    if names:
        doc[TrustRoot.REVIEWER.value]["names"] = names
    return doc


def public_keys_load(path: Path) -> dict[TrustRoot, Keyring]:
    """The verifying keyrings in a public-key file (see :func:`public_keys_document`).

    Raises:
        KeyringError: unreadable, not a public-key file, a root missing, or a private key inside.
    """
    data = _read_file(path)
    if data.get("format") != PUBLIC_KEYS_FORMAT:
        raise KeyringError(f"not a {PUBLIC_KEYS_FORMAT} file", path=str(path.name))
    rings = {}
    for root in TrustRoot:
        if not root.asymmetric:
            continue
        entry = data.get(root.value)
        if isinstance(entry, dict) and "keys" in entry:
            raise KeyringError(f"the public-key file holds private {root} keys; refuse to use it",
                               path=str(path.name))
        ring = _section_keyring(root, entry, private=False)
        if ring is None:
            raise KeyringError(f"the public-key file has no {root} keys", path=str(path.name))
        rings[root] = ring
    return rings


def reviewer_root_from_env() -> bool:
    """Whether the reviewer trust root is configured through environment variables."""
    return bool(os.environ.get(_public_env_name(TrustRoot.REVIEWER)) or os.environ.get(_env_name(TrustRoot.REVIEWER)))


def reviewer_key_env_entries(*, out: Path) -> tuple[str, str]:
    """``(public key entry, name entry)`` to add to ``RATCHET_REVIEWER_PUBLIC_KEYS`` and
    ``RATCHET_REVIEWER_KEY_NAMES`` for the reviewer key file ``out`` (public halves only).

    Raises:
        KeyringError: ``out`` is not a reviewer key file.
    """
    name, ring = reviewer_key_load(out)
    key_id = ring.current_key_id
    return f"{key_id}:{ring.public_keys()[key_id].to_b64()}", f"{key_id}:{name}"


def reviewer_key_create(*, name: str, out: Path) -> str:
    """Create one reviewer's own Ed25519 key file at ``out`` (mode 0600) and add its public key,
    bound to ``name``, to the reviewer trust root in the key file. Returns the key id.

    Where the reviewer root comes from the environment the key file is left alone: the operator
    adds the public key to ``RATCHET_REVIEWER_PUBLIC_KEYS`` and ``kid:name`` to
    ``RATCHET_REVIEWER_KEY_NAMES`` of every process (:func:`reviewer_key_env_entries` says what).

    Raises:
        KeyringError: ``out`` exists, or the name is not a short identifier.
    """
    if not _is_reviewer_name(name):
        raise KeyringError("a reviewer name is 1-64 letters, digits or . _ - @")
    key_id = f"reviewer-{''.join(c if c.isalnum() else '-' for c in name)[:40]}-{secrets.token_hex(3)}"
    secret = SecretKey.generate()
    doc = {"format": REVIEWER_KEY_FORMAT, "reviewer": name, "key_id": key_id, "private": secret.to_b64()}
    if not _write_private(Path(out), doc, exclusive=True):
        raise KeyringError("the reviewer key file already exists; choose another path", path=Path(out).name)
    if reviewer_root_from_env():
        return key_id
    path, _ = _key_file(None)

    def register(data: dict[str, Any]) -> None:
        section = data.setdefault(TrustRoot.REVIEWER.value, _new_section(TrustRoot.REVIEWER))
        section.setdefault("public", {})[key_id] = PublicKey.of(secret).to_b64()
        section.setdefault("names", {})[key_id] = name

    _key_file_update(path, register)
    return key_id


def reviewer_key_load(path: Path) -> tuple[str, Keyring]:
    """A reviewer's own key file: ``(reviewer name, signing keyring of the reviewer root)``.

    Raises:
        KeyringError: unreadable or not a reviewer key file (the message never shows the key).
    """
    data = _read_file(Path(path))
    if data.get("format") != REVIEWER_KEY_FORMAT or not isinstance(data.get("reviewer"), str) \
            or not isinstance(data.get("key_id"), str) or not isinstance(data.get("private"), str):
        raise KeyringError(f"not a {REVIEWER_KEY_FORMAT} file", path=Path(path).name)
    ring = Keyring(TrustRoot.REVIEWER, {data["key_id"]: SecretKey.from_b64(data["private"])}, data["key_id"])
    return data["reviewer"], ring


def _spec(current: str, keys: dict[str, str]) -> str:
    """``kid:BASE64[,kid:BASE64...]`` with the current key first (it is the one that signs)."""
    ordered = [current] + sorted(k for k in keys if k != current)
    return ",".join(f"{key_id}:{keys[key_id]}" for key_id in ordered if key_id in keys)


def agent_env_write(*, out: Path) -> list[str]:
    """Write the environment of an agent process (DESIGN.md section 2.4) to ``out``, mode 0600:
    ``RATCHET_CHECKPOINT_KEYS`` (the checkpoint key, a secret every process that writes
    checkpoints needs) and ``RATCHET_<ROOT>_PUBLIC_KEYS`` of the approval, reviewer and export
    roots. No private key of those roots is ever written; the file is created new (never
    overwritten) so no other reader holds it open.

    Args:
        out: a path that does not exist yet.

    Returns:
        The variable names written (never their values).

    Raises:
        KeyringError: no checkpoint key configured, a root without keys, or ``out`` exists.
    """
    spec = os.environ.get(_env_name(TrustRoot.CHECKPOINT))
    if not spec:
        path, _ = _key_file(None)
        section = _read_file(path).get(TrustRoot.CHECKPOINT.value)
        if not isinstance(section, dict) or not isinstance(section.get("keys"), dict) or not section["keys"]:
            raise KeyringError("no checkpoint key is configured (RATCHET_CHECKPOINT_KEYS or the key file)")
        spec = _spec(str(section.get("current")), {str(k): str(v) for k, v in section["keys"].items()})
    lines = {_env_name(TrustRoot.CHECKPOINT): spec}
    document = public_keys_document()
    for root in TrustRoot:
        if root.asymmetric:
            entry = document[root.value]
            lines[_public_env_name(root)] = _spec(entry["current"], entry["public"])
    text = "".join(f"{name}={value}\n" for name, value in lines.items())
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyringError("the agent environment file exists already; choose a new path", path=out.name) from None
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return list(lines)
