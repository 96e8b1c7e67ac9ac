"""The run detail page: the committed checkpoint as verified, the attachments it references and
every stored checkpoint. (Its trace timeline is in :mod:`review.queries.trace`.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.core.paginator import Page, Paginator

from runtime.checkpoint_checks import Restored
from runtime.checkpoint_reports import CheckpointReport, checkpoint_inspect
from runtime.checkpoints import checkpoint_verify
from runtime.core.checkpoint import ExecutedWrite, RunState
from runtime.core.ledger import state_ledger
from runtime.errors import RatchetError
from runtime.models import Attachment
from runtime.verifiers import verifier_output_digest

CHECKPOINTS_PER_PAGE = 10


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


def attachment_find(*, digest: str) -> Attachment | None:
    """The stored row of one attachment, or ``None``."""
    return Attachment.objects.filter(digest=digest).first()


@dataclass(frozen=True)
class CheckpointRow:
    """One stored checkpoint and its place relative to the high-water mark.

    ``role``: ``"committed"`` (the HWM names it), ``"earlier"`` (a lower generation: committed
    once, or an orphan beside the one that was), or ``"uncommitted"`` (at or above the HWM's
    generation but not named by it: left by a crashed or fenced commit).
    """

    report: CheckpointReport
    role: str


def checkpoint_list(*, run_id: str, page_number: Any = 1) -> Page:
    """Every stored checkpoint of the run, newest generation first, each verified
    (``checkpoint_inspect``); a page of :class:`CheckpointRow`."""
    reports: list[CheckpointReport] = checkpoint_inspect(run_id=run_id)
    committed = max((r.generation for r in reports if r.committed), default=None)
    rows = [
        CheckpointRow(
            report=r,
            role="committed"
            if r.committed
            else "earlier"
            if committed is not None and r.generation < committed
            else "uncommitted",
        )
        for r in reversed(reports)
    ]
    return Paginator(rows, CHECKPOINTS_PER_PAGE).get_page(page_number)
