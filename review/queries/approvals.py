"""The approvals queue page: runs waiting for an operator, one card each with its dry-run diff.

The queue reads through the runtime's service (``runtime.decisions.approvals.approvals_waiting``), which
verifies each run's committed checkpoint (DESIGN.md section 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator

from review.scope import scope_filter
from runtime.decisions.approvals import WaitingApproval, approvals_waiting
from runtime.errors import RatchetError
from runtime.evidence.attachments import attachment_get
from runtime.models import Phase, Run

APPROVALS_PER_PAGE = 10
"""Cards per approvals page. Each card verifies its run's committed checkpoint and reads its
dry-run diff, so the page's query count is bounded by this, never by how many runs wait."""

DIFF_LINE_LIMIT = 400
"""Lines of a dry-run diff shown on a card; the full diff is one download away."""


@dataclass(frozen=True)
class DiffLine:
    """One line of a unified diff and its kind: ``add``, ``del``, ``hunk``, ``meta`` or ``ctx``."""

    kind: str
    text: str


@dataclass(frozen=True)
class DiffView:
    """A dry-run diff ready to render as ``<pre>``: its lines (at most ``DIFF_LINE_LIMIT``), how
    many were left out, and an error text when the diff could not be read (then no lines)."""

    digest: str
    lines: list[DiffLine]
    omitted: int = 0
    error: str = ""


def diff_lines(text: str) -> list[DiffLine]:
    """Classify the lines of a unified diff (``git diff`` / ``diff -u`` output) for display."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file",
                            "old mode", "new mode", "similarity", "rename ", "Binary files")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append(DiffLine(kind, line))
    return out


def _diff_view(digest: str | None) -> DiffView | None:
    if not digest:
        return None
    try:
        data = attachment_get(digest=digest)
    except RatchetError as exc:
        # A diff that fails its digest check is not evidence: say so instead of showing it.
        return DiffView(digest=digest, lines=[], error=exc.message)
    lines = diff_lines(data.decode("utf-8", "replace"))
    return DiffView(digest=digest, lines=lines[:DIFF_LINE_LIMIT],
                    omitted=max(0, len(lines) - DIFF_LINE_LIMIT))


@dataclass(frozen=True)
class ApprovalCard:
    """One run waiting for an approval, as the queue shows it.

    ``waiting`` is the runtime's view (``runtime.decisions.approvals.WaitingApproval``: action, risk,
    digests, environment fingerprint and version, approval state); ``diff`` the dry-run diff.
    """

    waiting: WaitingApproval
    diff: DiffView | None

    @property
    def run_id(self) -> str:
        return self.waiting.run_id

    @property
    def summary(self) -> str:
        """The first line of a commit action's message, or ``""``."""
        message = self.waiting.action.get("params", {}).get("message")
        if not isinstance(message, str) or not message.strip():
            return ""
        return message.strip().splitlines()[0]

    @property
    def params(self) -> dict[str, Any]:
        """The action's parameters without the file changes (those are in the diff)."""
        return {k: v for k, v in self.waiting.action.get("params", {}).items() if k != "changes"}


@dataclass(frozen=True)
class ApprovalsQueue:
    """A page of :class:`ApprovalCard` (``page.object_list``).

    ``left_out``: run ids on this page that the runtime did not list: their committed checkpoint
    does not verify (they need forensic handling, not an approval) or they stopped waiting
    between the two reads.
    """

    page: Page
    left_out: list[str]


def approvals_queue(*, user: Any, run: str = "", page_number: Any = 1) -> ApprovalsQueue:
    """Runs in ``awaiting_approval`` of the tenants ``user`` may see (DESIGN.md section 6.6),
    longest waiting first, one page at a time.

    Args:
        user: the signed-in user (``review.scope``).
        run: only this run id (``""``: all).
        page_number: 1-based page; anything invalid gives the first or last page.
    """
    ids = scope_filter(user=user, queryset=Run.objects.filter(phase=Phase.AWAITING_APPROVAL.value))
    if run:
        ids = ids.filter(run_id=run)
    ids = ids.order_by("updated_at", "run_id").values_list("run_id", flat=True)
    page = Paginator(ids, APPROVALS_PER_PAGE).get_page(page_number)
    page_ids = list(page.object_list)
    waiting = {w.run_id: w for w in approvals_waiting(run_ids=page_ids)} if page_ids else {}
    page.object_list = [
        ApprovalCard(waiting=waiting[run_id], diff=_diff_view(waiting[run_id].dry_run_diff))
        for run_id in page_ids
        if run_id in waiting
    ]
    return ApprovalsQueue(page=page, left_out=[r for r in page_ids if r not in waiting])
