"""Content-addressed attachments: screenshots, diffs, DOM dumps (DESIGN.md section 3).

A checkpoint never copies large observations; it references them by ``sha256:<hex>`` digest.
The bytes are stored once, under ``attachments/ab/cd/<hex>``, through Django's storage API
(``default_storage``), so a multi-machine deployment can point ``STORAGES["default"]`` at object
storage without code changes. The ``Attachment`` row is written only after the bytes are stored,
so a row never names missing bytes; stored bytes without a row are harmless and are re-checked
(and replaced if they are a torn write) by the next put of the same content.

Bytes a git repository already holds (:class:`runtime.core.blob_origin.GitObjectBytes`, from the
git-history planner) are not copied: the row records ``git:<oid>:<repository>`` and reads run
``git cat-file blob`` there, re-hashed like any attachment (DESIGN.md section 4.12).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.storage import Storage, default_storage
from django.db import router

from runtime.core.blob_origin import git_location, git_location_parse
from runtime.core.canonical import check_digest, digest_bytes
from runtime.database.commit_writes import RowsInsert
from runtime.database.statements import compiled_rows
from runtime.errors import AttachmentError, DigestFormatError
from runtime.models import Attachment


def storage_name(digest: str) -> str:
    """Storage path ``attachments/ab/cd/<hex>``; the fan-out keeps directories small."""
    hex_ = digest.removeprefix("sha256:")
    return f"attachments/{hex_[:2]}/{hex_[2:4]}/{hex_}"


def stored_digest(storage: Storage, name: str) -> str | None:
    """``sha256:<hex>`` of what ``name`` holds in ``storage`` (read in 1 MiB chunks), or None when
    it is missing or unreadable. Attachments and archived bundles are both checked with it."""
    try:
        with storage.open(name, "rb") as handle:
            h = hashlib.sha256()
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                h.update(chunk)
    except (FileNotFoundError, OSError):
        return None
    return "sha256:" + h.hexdigest()


def attachment_put(*, data: bytes, content_type: str = "application/octet-stream",
                   row_writes: list[Callable[[], None]] | None = None) -> str:
    """Store ``data`` once and return its digest ``"sha256:<hex>"``.

    Putting the same bytes again is a no-op returning the same digest. Bytes already in storage
    without a row (an earlier put crashed) are re-hashed and replaced if they do not match.

    Args:
        data: the content (bytes).
        content_type: MIME type recorded on first put (at most 100 chars).
        row_writes: if given, the bytes are stored now and the row's INSERT is appended here for
            the caller's next checkpoint commit to run in its transaction (DESIGN.md section 4.3);
            until then the bytes are "stored without a row", which a later put repairs.

    Raises:
        TypeError: ``data`` is not bytes.
        AttachmentError: the storage refused the write.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError("attachment data must be bytes")
    location = git_location(data)
    data = bytes(data)
    digest = digest_bytes(data)
    name = storage_name(digest)
    # Inside a checkpoint commit the row is an INSERT that ignores a row already there, and the
    # bytes on a local disk are re-hashed below before anything is written, so asking the
    # database whether the row exists would only cost a round trip. Elsewhere (no commit to
    # ride on, or object storage, where re-reading the bytes costs more than the read) it is asked.
    on_disk = _local_path(default_storage, name) is not None
    asked = not (on_disk and row_writes is not None)
    if asked and _row_exists(digest) and (location is not None or default_storage.exists(name)):
        return digest
    if location is not None and len(location) <= Attachment._meta.get_field("storage_name").max_length:
        # Git holds these bytes already: record where, write nothing.
        _row_write(digest=digest, size=len(data), content_type=content_type, name=location,
                   row_writes=row_writes)
        return digest
    if stored_digest(default_storage, name) != digest:
        try:
            if on_disk:
                _file_replace(default_storage, name, data)
            else:
                _storage_save(default_storage, name, data, digest)
        except OSError as exc:
            raise AttachmentError(
                f"storage refused the attachment: {type(exc).__name__}", digest=digest
            ) from None
    _row_write(digest=digest, size=len(data), content_type=content_type, name=name, row_writes=row_writes)
    return digest


def _local_path(storage: Storage, name: str) -> Path | None:
    # Django's own rule: a storage whose files are not on the local filesystem does not
    # implement path() (it raises NotImplementedError).
    try:
        return Path(storage.path(name))
    except NotImplementedError:
        return None


def _file_replace(storage: Storage, name: str, data: bytes) -> None:
    """Put ``data`` at ``name`` on a local filesystem storage atomically: a temp file in the same
    directory, then ``os.replace``. Two processes putting the same content at once (two runs
    writing the same bytes) each replace the name with a whole copy, and a reader, here or in
    another process, sees a whole copy or none, never a partial one that would hash wrong and
    be taken for tampering. A torn file left by a crash is replaced the same way."""
    path = Path(storage.path(name))
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".put-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        mode = getattr(storage, "file_permissions_mode", None)
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _storage_save(storage: Storage, name: str, data: bytes, digest: str) -> None:
    """Put ``data`` at ``name`` through the storage API (object storage, whose writes are whole).

    Raises:
        AttachmentError: a concurrent put won the name and what it holds does not hash to ``digest``.
    """
    if storage.exists(name):
        storage.delete(name)  # a torn write from a crashed put: replace it
    saved = storage.save(name, ContentFile(data))
    if saved != name:
        # A concurrent put of the same content won the name; ours got a suffixed copy.
        storage.delete(saved)
        if stored_digest(storage, name) != digest:
            raise AttachmentError("stored attachment does not match its digest", digest=digest)


def _row_write(*, digest: str, size: int, content_type: str, name: str,
               row_writes: list[Callable[[], None]] | None) -> None:
    if row_writes is not None:
        row = Attachment(digest=digest, size=size, content_type=content_type[:100], storage_name=name)
        row_writes.append(RowsInsert(alias=router.db_for_write(Attachment), objs=(row,)))
        return
    Attachment.objects.get_or_create(
        digest=digest, defaults={"size": size, "content_type": content_type[:100], "storage_name": name})


def _git_read(name: str) -> bytes | None:
    """The bytes a ``git:`` location names, or None (not such a location, or git cannot read it)."""
    parsed = git_location_parse(name)
    if parsed is None:
        return None
    repository, oid = parsed
    try:
        done = subprocess.run(["git", "-C", repository, "cat-file", "blob", oid], capture_output=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _row_exists(digest: str) -> bool:
    # Compiled once per process: a step puts several attachments (the planner's blobs, the
    # observation's evidence), and building the ORM query cost more than running it.
    return bool(compiled_rows(
        alias=router.db_for_read(Attachment), shape=("attachment_exists",),
        build=lambda s: Attachment.objects.filter(digest=s["digest"]).values_list("pk")[:1],
        slots={"digest": digest}))


def attachment_get(*, digest: str) -> bytes:
    """Return the bytes of an attachment after re-hashing them.

    Args:
        digest: ``"sha256:<64 hex>"`` as returned by :func:`attachment_put`.

    Raises:
        AttachmentError: malformed digest, unknown attachment, bytes missing from storage, or
            bytes that no longer hash to ``digest`` (corruption or tampering).
    """
    try:
        check_digest(digest)
    except DigestFormatError:
        raise AttachmentError("not an attachment digest", digest=repr(digest)[:80]) from None
    row = Attachment.objects.filter(digest=digest).values("storage_name").first()
    # No row yet: the bytes may be stored with their row waiting for the next checkpoint commit
    # (``row_writes``); they are content-addressed and re-hashed below, so they are safe to read.
    name = row["storage_name"] if row is not None else storage_name(digest)
    from_git = _git_read(name)
    if from_git is not None and digest_bytes(from_git) == digest:
        return from_git
    if from_git is not None or git_location_parse(name) is not None:
        name = storage_name(digest)  # the repository moved or changed: a stored copy may remain
    if row is None and not default_storage.exists(name):
        raise AttachmentError("no attachment with this digest", digest=digest)
    try:
        with default_storage.open(name, "rb") as handle:
            data = handle.read()
    except (FileNotFoundError, OSError):
        raise AttachmentError("attachment bytes are missing from storage", digest=digest) from None
    if digest_bytes(data) != digest:
        raise AttachmentError(digest=digest)
    return data


def attachment_blob(digest: str) -> bytes:
    """:func:`attachment_get` with the positional signature of an adapter's ``BlobSource``
    (``runtime.adapters.base``): adapters read the blobs a planner stored by digest through it.

    Raises:
        AttachmentError: as :func:`attachment_get`.
    """
    return attachment_get(digest=digest)
