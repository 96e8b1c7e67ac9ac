"""Removing attachments that only archived runs referenced (DESIGN.md section 4.11).

Attachments are content-addressed and shared: one stored file may be named by many runs. After a
pass, a mark-and-sweep keeps every attachment whose digest any remaining checkpoint envelope,
trace payload, review case, receipt or ledger entry names (archived runs hold none of those rows
any more), and every attachment younger than ``RATCHET_ARCHIVE_ATTACHMENT_GRACE_SECONDS`` (a live
step may have stored it and not committed the checkpoint naming it yet). The rest go: bytes
first, then the row, so a pass killed in between leaves a row whose bytes are gone, which the
next sweep removes, and a later put of the same content stores the bytes again.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.conf import settings
from django.core.files.storage import default_storage

from runtime.core.blob_origin import git_location_parse
from runtime.database.clock import db_now
from runtime.models import Attachment, Checkpoint, IdempotencyRecord, LedgerEntry, ReviewCase, TraceEvent

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_CASE_FIELDS = ("pending", "receipt", "environment", "observed", "trace_excerpt", "sealed", "decision")


def referenced_digests() -> set[str]:
    """Every ``sha256:<hex>`` the remaining evidence rows name (a superset of the attachments
    they need: a digest that is not an attachment's is harmless here)."""
    found: set[str] = set()
    for raw in Checkpoint.objects.values_list("envelope", flat=True).iterator(chunk_size=500):
        found.update(_DIGEST.findall(bytes(raw).decode("utf-8", "replace")))
    for payload in TraceEvent.objects.values_list("payload", flat=True).iterator(chunk_size=2000):
        found.update(_DIGEST.findall(json.dumps(payload)))
    for body in LedgerEntry.objects.values_list("body", flat=True).iterator(chunk_size=2000):
        found.update(_DIGEST.findall(body))
    for receipt in IdempotencyRecord.objects.values_list("receipt", flat=True).iterator(chunk_size=2000):
        found.update(_DIGEST.findall(json.dumps(receipt)))
    for case in ReviewCase.objects.values(*_CASE_FIELDS).iterator(chunk_size=500):
        found.update(_DIGEST.findall(json.dumps(case)))
    return found


def attachments_sweep() -> int:
    """Remove attachments no remaining evidence names (see the module docstring); return how many.

    Raises:
        django.db.Error: the database failed (nothing more is removed).
    """
    keep = referenced_digests()
    cutoff = db_now() - timedelta(seconds=settings.RATCHET_ARCHIVE_ATTACHMENT_GRACE_SECONDS)
    removed = 0
    old = Attachment.objects.filter(created_at__lt=cutoff).values_list("digest", "storage_name")
    for digest, name in list(old.iterator(chunk_size=2000)):
        if digest in keep:
            continue
        if git_location_parse(name) is None:  # a git location's bytes are git's, not ours
            default_storage.delete(name)
        Attachment.objects.filter(digest=digest).delete()
        removed += 1
    return removed
