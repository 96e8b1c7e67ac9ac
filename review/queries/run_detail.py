"""The run detail page: the committed checkpoint as verified, the attachments it references and
every stored checkpoint. (Its trace timeline is in :mod:`review.queries.trace`.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.core.cache import cache
from django.core.paginator import Page, Paginator

from review.scope import AllTenants, scope_run_check, scope_tenants
from runtime.checkpoints.checks import Restored, stored_envelope_open
from runtime.checkpoints.high_water_marks import HighWaterMarkInfo
from runtime.checkpoints.mark_completion import hwm_for_display
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.reports import CheckpointReport
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import ExecutedWrite, RunState
from runtime.core.ledger import state_ledger
from runtime.core.signing import TrustRoot
from runtime.errors import RatchetError, RunNotFoundError
from runtime.keys import keyring_for
from runtime.models import Attachment, Checkpoint, Run, TraceEvent
from runtime.verifiers.base import verifier_output_digest

CHECKPOINTS_PER_PAGE = 10

CHECKPOINT_STATUS_SECONDS = 3600
"""How long a checkpoint row's verification result is kept (seconds)."""


@dataclass(frozen=True)
class AttachmentRef:
    """An attachment digest the committed state references, where, and its stored row (or None)."""

    digest: str
    where: str
    row: Attachment | None


@dataclass(frozen=True)
class Committed:
    """The run's committed checkpoint as ``checkpoint_verify`` judged it.

    ``restored`` is set only when every check passed; otherwise ``error`` holds the reason and the
    page shows nothing from the payload (an unverified payload is not evidence).
    """

    restored: Restored | None
    error: str = ""
    attachments: list[AttachmentRef] = field(default_factory=list)

    @property
    def state(self) -> RunState | None:
        """The verified run state, or ``None`` when verification failed."""
        return self.restored.state if self.restored else None

    @cached_property
    def executed(self) -> list[ExecutedWrite]:
        """The executed writes in the run's receipts ledger, verified in full with the
        checkpoint (DESIGN.md section 3.1); empty when verification failed."""
        return state_ledger(self.restored.state).executed_writes() if self.restored else []


def checkpoint_committed(*, run_id: str) -> Committed:
    """Verify and load the committed checkpoint of ``run_id`` (DESIGN.md section 4), plus the
    attachments its state references (one query)."""
    try:
        restored = checkpoint_verify(run_id=run_id)
    except RatchetError as exc:
        return Committed(restored=None, error=str(exc))
    return Committed(restored=restored, attachments=_attachments(restored.state))


def _attachments(state: RunState) -> list[AttachmentRef]:
    found: dict[str, str] = {}
    for digest in state.environment.attachments:
        found.setdefault(digest, "environment")
    if state.pending is not None:
        for digest in state.pending.pre_state.attachments:
            found.setdefault(digest, "pending pre-state")
    # A verifier's output is named in its signed verdict, or in the stop detail when it gave
    # none (a command that timed out): DESIGN.md section 6.5.
    for result in state.verifier_results:
        named = verifier_output_digest(result.detail)
        if named:
            found.setdefault(named, f"verifier output at version {result.environment_version}")
    named = verifier_output_digest(state.stop_detail)
    if named:
        found.setdefault(named, "verifier output (stop detail)")
    if not found:
        return []
    rows = {a.digest: a for a in Attachment.objects.filter(digest__in=list(found))}
    return [AttachmentRef(digest=d, where=w, row=rows.get(d)) for d, w in found.items()]


def attachment_find(*, digest: str, user: Any, run_id: str = "") -> Attachment | None:
    """The stored row of one attachment ``user`` may download, or ``None`` (DESIGN.md section
    6.6).

    Attachments are content-addressed and shared by every tenant, so a digest alone proves
    nothing: a user who sees every tenant gets any stored attachment; anyone else only one that
    the run ``run_id`` (in their scope) references from its verified committed checkpoint or as
    the dry-run diff of a proposed intent in its trace.
    """
    row = Attachment.objects.filter(digest=digest).first()
    if row is None or isinstance(scope_tenants(user=user), AllTenants):
        return row
    if not run_id:
        return None
    try:
        scope_run_check(user=user, run_id=run_id)
    except RunNotFoundError:
        return None
    if digest in {a.digest for a in checkpoint_committed(run_id=run_id).attachments}:
        return row
    # An amended action's diff is in its intent.amended event (DESIGN.md section 6.13).
    # Matched by the database (a JSON key lookup), so a long trace is never loaded to find one.
    diffs = TraceEvent.objects.filter(run_id=run_id, event_type__in=("intent.proposed", "intent.amended"),
                                      payload__dry_run_diff=digest)
    return row if diffs.exists() else None


@dataclass(frozen=True)
class CheckpointRow:
    """One stored checkpoint and its place relative to the high-water mark.

    ``role``: ``"committed"`` (the HWM names it), ``"earlier"`` (a lower generation: committed
    once, or an orphan beside the one that was), or ``"uncommitted"`` (at or above the HWM's
    generation but not named by it: left by a crashed or fenced commit).
    """

    report: CheckpointReport
    role: str


def _row_status(row: Checkpoint, raw: bytes, actual: str, keyring: Any, run_id: str) -> str:
    """``"valid"`` or the verification error of one stored envelope, cached per checkpoint id
    and the hash of its bytes (DESIGN.md section 6.8): the row is append-only, and bytes altered
    later hash differently, so they miss the cache and are verified again."""
    keys = ",".join(sorted(keyring.key_ids))
    key = f"ratchet:checkpoint-status:{row.pk}:{row.digest}:{actual}:{keys}"
    status = cache.get(key)
    if status is None:
        try:
            stored_envelope_open(raw=raw, run_id=run_id, generation=row.generation,
                                 keyring=keyring)
        except RatchetError as exc:
            status = str(exc)
        else:
            status = "valid" if actual == row.digest else "stored bytes do not match the row's digest"
        cache.set(key, status, CHECKPOINT_STATUS_SECONDS)
    return status


def checkpoint_list(*, run: Run, page_number: Any = 1) -> Page:
    """The run's stored checkpoints, newest generation first, one page of
    :class:`CheckpointRow`; only the rows on the page are verified (each result cached per
    checkpoint id), so a run with thousands of generations costs what a run with ten does."""
    rows = Checkpoint.objects.filter(run_id=run.run_id).order_by("-generation", "-id")
    page = Paginator(rows, CHECKPOINTS_PER_PAGE).get_page(page_number)
    hwm: HighWaterMarkInfo | None = hwm_for_display(run=run)
    try:
        keyring, keyring_error = keyring_for(TrustRoot.CHECKPOINT), ""
    except RatchetError as exc:
        keyring, keyring_error = None, str(exc)
    out = []
    for row in page.object_list:
        raw = bytes(row.envelope)
        actual = digest_bytes(raw)
        committed = hwm is not None and hwm.generation == row.generation and hwm.digest == actual
        status = keyring_error if keyring is None else _row_status(row, raw, actual, keyring,
                                                                   run.run_id)
        report = CheckpointReport(
            generation=row.generation, digest=row.digest, key_id=row.key_id,
            schema_version=row.schema_version, lease_version=row.lease_version,
            created_at=row.created_at, committed=committed, status=status, envelope=None,
        )
        role = ("committed" if committed
                else "earlier" if hwm is not None and row.generation < hwm.generation
                else "uncommitted")
        out.append(CheckpointRow(report=report, role=role))
    page.object_list = out
    return page
