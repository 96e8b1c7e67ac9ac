"""Archived bundles in a Django storage backend, written durably and read back by digest
(DESIGN.md section 4.11).

The storage is ``STORAGES[RATCHET_ARCHIVE_STORAGE]`` (the filesystem storage by default; any
backend, e.g. django-storages' S3 backend, works). A bundle is stored under
``<RATCHET_ARCHIVE_PREFIX>/<run id[:2]>/<run id>.json`` as canonical JSON. On a local backend
(one with ``path()``) the file and its directory are fsync'd before the digest is recorded; on
any backend the stored bytes are read back and re-hashed, so a torn or refused write is caught
before the run's rows are removed.
"""

from __future__ import annotations

import os
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

from runtime.core.canonical import digest_bytes
from runtime.errors import ArchiveStorageError
from runtime.evidence.attachments import stored_digest


def archive_storage() -> Storage:
    """The storage backend archived bundles go to (``STORAGES[RATCHET_ARCHIVE_STORAGE]``)."""
    return storages[settings.RATCHET_ARCHIVE_STORAGE]


def bundle_name(run_id: str) -> str:
    """Where the bundle of ``run_id`` is stored; the two-character fan-out keeps folders small."""
    prefix = settings.RATCHET_ARCHIVE_PREFIX.strip("/")
    return f"{prefix}/{run_id[:2]}/{run_id}.json"


def _fsync_local(storage: Storage, name: str) -> None:
    try:
        path = storage.path(name)
    except NotImplementedError:
        return  # a remote backend: the read-back below is the check
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fd = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def bundle_store(*, run_id: str, data: bytes) -> tuple[str, str]:
    """Store ``data`` (a bundle's bytes) as the archive of ``run_id``; return ``(name, digest)``.

    A file left there by an earlier pass that died before recording it is replaced.

    Raises:
        ArchiveStorageError: the backend refused the write, or the stored bytes do not hash to
            the bundle's digest.
    """
    storage = archive_storage()
    name, digest = bundle_name(run_id), digest_bytes(data)
    try:
        if storage.exists(name):
            storage.delete(name)
        saved = storage.save(name, ContentFile(data))
        _fsync_local(storage, saved)
    except OSError as exc:
        raise ArchiveStorageError(f"the archive storage refused the bundle: {type(exc).__name__}",
                                  run_id=run_id, name=name) from None
    if stored_digest(storage, saved) != digest:
        raise ArchiveStorageError("the stored bundle does not hash to what was written",
                                  run_id=run_id, name=saved, digest=digest)
    return saved, digest


def bundle_fetch(*, name: str, digest: str) -> bytes:
    """The archived bundle's bytes, checked against the digest recorded for it.

    Raises:
        ArchiveStorageError: the bundle is missing or does not hash to ``digest``.
    """
    storage = archive_storage()
    try:
        with storage.open(name, "rb") as handle:
            data: Any = handle.read()
    except (FileNotFoundError, OSError):
        raise ArchiveStorageError("the archived bundle is missing from the archive storage",
                                  name=name) from None
    data = data if isinstance(data, bytes) else str(data).encode("utf-8")
    if digest_bytes(data) != digest:
        raise ArchiveStorageError("the archived bundle does not hash to its recorded digest",
                                  name=name, digest=digest)
    return data
