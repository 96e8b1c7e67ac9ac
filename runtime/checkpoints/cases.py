"""Review-case rows: the database copy of the cases a checkpoint holds (DESIGN.md section 6).

The signed checkpoint's ``ReviewCaseRef`` list is authoritative; the ``ReviewCase`` rows are
what the dashboard lists and searches. A freeze opens its row (``case_open``) before the freeze
commits, with an id derived from the generation that commit will have, so a crash in between
and a second freeze after recovery find the same row. A decision updates its row after the
checkpoint commit; ``case_sync`` repairs a row a crash left behind, on every restore.

Row bookkeeping only: deciding a case is ``runtime.decisions.reviews``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Q, Subquery

from runtime.core.canonical import canonical_json, sha256_hex
from runtime.core.checkpoint import Phase, ReviewCaseRef, ReviewCaseStatus, RunState
from runtime.models import CaseStatus, ReviewCase, TraceEvent

TRACE_EXCERPT_EVENTS = 20
"""Newest trace events copied into a case row when it opens."""


def review_case_id(*, run_id: str, generation: int) -> str:
    """Deterministic case id for the freeze committed as ``generation`` of ``run_id``."""
    return "case_" + sha256_hex(canonical_json({"run_id": run_id, "generation": generation}))[:32]


def case_open(*, run_id: str, case: ReviewCaseRef, detail: str, pending: dict[str, Any] | None,
              receipt: dict[str, Any] | None, environment: dict[str, Any],
              observed: dict[str, Any] | None) -> ReviewCase:
    """Create (or find, after a crash) the case row for a freeze. Called by the engine."""
    excerpt = [
        {"seq": seq, "type": event_type, "payload": payload, "environment_version": env, "hash": digest}
        for seq, event_type, payload, env, digest in TraceEvent.objects.filter(run_id=run_id)
        .order_by("-seq").values_list("seq", "event_type", "payload", "environment_version", "hash")
        [:TRACE_EXCERPT_EVENTS]
    ][::-1]
    row, _ = ReviewCase.objects.get_or_create(
        case_id=case.case_id,
        defaults={
            "run_id": run_id,
            "reason": case.reason.value,
            "detail": detail,
            "idempotency_key": case.idempotency_key or "",
            "pending": pending,
            "receipt": receipt,
            "receipt_fingerprint": case.receipt_fingerprint or "",
            "environment": environment,
            "observed": observed,
            "trace_excerpt": excerpt,
        },
    )
    return row


def case_sync(*, run_id: str, state: RunState) -> int:
    """Bring case rows in line with the checkpoint's (authoritative) case refs; returns rows fixed."""
    fixed = 0
    for ref in state.review_cases:
        if ref.status == ReviewCaseStatus.OPEN or ref.decision is None:
            continue
        fixed += ReviewCase.objects.filter(case_id=ref.case_id, status=CaseStatus.OPEN).update(
            status=ref.status.value,
            decision=ref.decision.model_dump(mode="json"),
            decided_by=ref.decision.reviewer,
            decided_at=ref.decision.issued_at,
        )
    return fixed


def cases_awaiting_review() -> Q:
    """The ``ReviewCase`` filter of the cases a reviewer must still decide (DESIGN.md section 4.10).

    An open row, and also the newest case of a run whose row is ``needs_review`` whatever that
    case's row says: a decision moves its run out of ``needs_review`` in the same commit, so a
    decided-looking newest case of a frozen run is a row edited behind the runtime's back (or a
    crash between the commit and the row update, which ``case_sync`` repairs on the next
    restore). Either way the run still waits for a person, so the queue keeps it.
    """
    newest = (ReviewCase.objects.filter(run_id=OuterRef("run_id"))
              .order_by("-opened_at", "-case_id").values("case_id")[:1])
    return Q(status=CaseStatus.OPEN) | (Q(run__phase=Phase.NEEDS_REVIEW.value) & Q(case_id=Subquery(newest)))
