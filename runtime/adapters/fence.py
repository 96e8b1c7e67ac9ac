"""The fence file: the newest fencing token an environment has accepted (DESIGN.md section 4).

A writer whose lease version is older than the newest token seen is refused before anything is
written (Ownership: leases and fencing). The file holds one decimal number and a newline, is
replaced atomically, and a missing file means 0. Imports nothing from Django.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runtime.adapters.durable_files import atomic_replace
from runtime.errors import AdapterStoreCorruptError


def fence_read(path: Path, *, label: str, **context: Any) -> int:
    """The token stored in ``path``, or 0 when the file does not exist.

    Args:
        path: the fence file.
        label: how the error names the file (``"the fence file"``, ``".git/ratchet-fence"``).
        context: identifiers for the error (``instance_id=...``).

    Raises:
        AdapterStoreCorruptError: the file does not hold a non-negative decimal number.
    """
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0
    except UnicodeDecodeError:
        text = ""
    if not text.isdigit():
        raise AdapterStoreCorruptError(f"{label} is not a number", **context)
    return int(text)


def fence_raise(path: Path, token: int, *, label: str, **context: Any) -> None:
    """Store ``token`` in ``path`` if it is newer than the stored one; never lowers the fence.

    Args:
        path: the fence file; its directory must exist.
        token: the caller's lease version (>= 0, already validated).
        label, context: as for :func:`fence_read`.

    Raises:
        AdapterStoreCorruptError: the stored value is not a number.
    """
    if token > fence_read(path, label=label, **context):
        atomic_replace(path.parent, path.name, f"{token}\n".encode("ascii"))


def adapter_fence_advance(adapter: object, token: int) -> bool:
    """Raise ``adapter``'s fence to ``token`` before a look-up by key (DESIGN.md section 4.6).

    A new lease holder calls this before it asks the adapter for a key's receipt, so a stale
    holder that already passed the engine's lease check is refused at the adapter afterwards
    instead of writing behind the new holder's look-up. Adapters offer it as
    ``fence_advance(fencing_token)``; one without it (a service that fences in its own store)
    is left alone.

    Args:
        adapter: any adapter.
        token: the caller's fencing token (>= 0).

    Returns:
        Whether the adapter took the token.

    Raises:
        FencingTokenError: ``token`` is older than the newest the adapter has seen.
    """
    advance = getattr(adapter, "fence_advance", None)
    if advance is None:
        return False
    advance(token)
    return True
