"""What a polling page compares to know whether anything it shows has changed (DESIGN.md
section 6.8), and the navigation badge counts.

Each page polls with the token of what it last rendered (``since``). The token is computed from
a few indexed columns, so an unchanged page costs one or two small queries and answers 204; a
changed one re-renders every region that can change, swapped together (htmx out-of-band swaps).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from review.scope import scope_filter
from runtime.checkpoints.cases import cases_awaiting_review
from runtime.models import Phase, ReviewCase, Run

POLL_SECONDS = 2
"""How often (seconds) a visible page asks whether anything changed."""

BADGE_CAP = 99
"""Navigation badges count up to this many and then say ``99+``: the count stays bounded."""

TOKEN_ROWS = 100
"""Rows a list token looks at (the rows a page can show, with room)."""

TERMINAL_PHASES = frozenset({Phase.COMPLETED.value, Phase.FAILED.value, Phase.CANCELLED.value})
"""Phases after which a run never changes: its page stops polling."""


def _digest(parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class NavCounts:
    """Waiting approvals and open review cases, each capped at ``BADGE_CAP + 1``."""

    approvals: int
    cases: int

    @staticmethod
    def label(n: int) -> str:
        return f"{BADGE_CAP}+" if n > BADGE_CAP else str(n)

    @property
    def approvals_label(self) -> str:
        return self.label(self.approvals)

    @property
    def cases_label(self) -> str:
        return self.label(self.cases)


def nav_counts(*, user: Any) -> NavCounts:
    """Count waiting approvals (phase index) and open cases (status index) of the tenants
    ``user`` may see (DESIGN.md section 6.6), bounded (two queries reading at most
    ``BADGE_CAP + 1`` index entries each)."""
    approvals = len(
        scope_filter(user=user, queryset=Run.objects.filter(phase=Phase.AWAITING_APPROVAL.value))
        .order_by()
        .values_list("pk", flat=True)[: BADGE_CAP + 1]
    )
    cases = len(
        scope_filter(user=user, queryset=ReviewCase.objects.filter(cases_awaiting_review()),
                     field="run__tenant_id")
        .order_by()
        .values_list("pk", flat=True)[: BADGE_CAP + 1]
    )
    return NavCounts(approvals=approvals, cases=cases)


def run_token(run: Run, counts: NavCounts) -> str:
    """What the run page shows changes only when one of these does: phase, state version
    (every checkpoint commit), trace head, lease version, cancel flag, badges."""
    return _digest((run.phase, run.stop_reason, run.state_version, run.trace_seq,
                    run.lease_version, run.cancel_requested, counts))


def rows_token(rows: QuerySet[Any], fields: tuple[str, ...], counts: NavCounts) -> str:
    """A token over the first ``TOKEN_ROWS`` rows of an ordered list page (one query)."""
    return _digest((list(rows.values_list(*fields)[:TOKEN_ROWS]), counts))


def approvals_token(counts: NavCounts, *, user: Any) -> str:
    """The approvals queue (of the tenants ``user`` may see) changes when a run starts or stops
    waiting, or moves."""
    rows = scope_filter(user=user, queryset=Run.objects.filter(
        phase=Phase.AWAITING_APPROVAL.value)).order_by("updated_at", "run_id")
    return rows_token(rows, ("run_id", "state_version"), counts)


def cases_token(counts: NavCounts, *, user: Any, status: str = "") -> str:
    """The cases list (of the tenants ``user`` may see) changes when a case opens or is decided."""
    rows = scope_filter(user=user, queryset=ReviewCase.objects.all(),
                        field="run__tenant_id").order_by("-opened_at", "case_id")
    if status:
        rows = rows.filter(status=status)
    return rows_token(rows, ("case_id", "status"), counts)
