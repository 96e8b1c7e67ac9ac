"""Fetching an action's content by digest, checked before anything is written (DESIGN.md section 5).

Imports nothing from Django.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from runtime.errors import BlobDigestMismatchError, BlobUnavailableError, RatchetError

if TYPE_CHECKING:
    from runtime.adapters.base import BlobSource


def fetch_blob(blobs: BlobSource, content: str, *, path: str) -> bytes:
    """Fetch ``content`` from ``blobs`` and check its sha256 before anything is written.

    Args:
        blobs: the engine's attachment getter.
        content: ``sha256:<hex>`` digest named by the action.
        path: the path being written, for the error context.

    Raises:
        BlobDigestMismatchError: the bytes hash to something else.
        BlobUnavailableError: the source raised ``LookupError`` or ``OSError``, or returned
            something that is not bytes. Errors from the runtime's own tree pass through.
    """
    try:
        data = blobs(content)
    except RatchetError:
        raise
    except (LookupError, OSError) as exc:
        raise BlobUnavailableError(f"blob source failed: {type(exc).__name__}", path=path,
                                   content=content) from None
    if not isinstance(data, bytes | bytearray | memoryview):
        raise BlobUnavailableError("blob source returned something that is not bytes", path=path,
                                   content=content)
    data = bytes(data)
    actual = "sha256:" + hashlib.sha256(data).hexdigest()
    if actual != content:
        raise BlobDigestMismatchError(path=path, expected=content, actual=actual)
    return data
