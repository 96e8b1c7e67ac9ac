"""Rows derived from the signed checkpoint must agree with it (DESIGN.md section 4.10).

The run row's ``phase`` and ``stop_reason`` and a review case row's ``status`` are copies the
commit writes beside the signed checkpoint so that lists, queues and the sweeper can filter
without opening envelopes. They carry no signature: anyone who can write the database can change
them. Every decision that would *leave a run alone* because of such a row (a worker dropping a
message for a run that looks finished, ``resume`` reporting a completed run, the reviewers' queue
dropping a decided case) is checked against the signed state with the rules here, and a
disagreement fails closed. Framework-free: plain values in, a finding out.
"""

from __future__ import annotations

from collections.abc import Iterable

ROW_ONLY_FREEZES = frozenset({("needs_review", "ledger_corrupt"), ("needs_review", "restore_refused")})
"""``(phase, stop_reason)`` a run row may hold without a checkpoint saying so: a ledger that does
not verify, or a restore that failed closed, cannot be extended by a commit, so its freeze is
written to the row alone (``runtime.checkpoints.ledger.ledger_failure_freeze``,
``runtime.checkpoints.refusal_freeze``). Holding a run *back* is always safe."""

ROW_ONLY_CASE_REASONS = frozenset({"ledger_corrupt", "restore_refused", "code_changed"})
"""Reasons of review cases opened on the rows alone, with no checkpoint listing them: a ledger or
restore that failed closed, or a resume refused under changed code (DESIGN.md section 4.15).
Such a case only ever holds a run back or tells a person, so a bundle does not report it as
missing from the checkpoint."""


def run_row_disagreement(*, row_phase: str, row_stop_reason: str, row_generation: int,
                         signed_phase: str, signed_stop_reason: str, signed_generation: int) -> str | None:
    """What a run row says that its signed checkpoint does not, or None when they agree.

    Args:
        row_phase / row_stop_reason / row_generation: the run row's columns (``""`` for no reason).
        signed_phase / signed_stop_reason / signed_generation: the committed checkpoint's.

    Returns:
        A one-line finding naming both sides, or None. A row one generation ahead of the mark is
        a commit whose mark is still to be completed (DESIGN.md section 4.3) and is not judged
        here; a row-only freeze (:data:`ROW_ONLY_FREEZES`) agrees with any signed state.
    """
    if row_generation != signed_generation:
        return None
    if (row_phase, row_stop_reason) in ROW_ONLY_FREEZES:
        return None
    if row_phase != signed_phase or (row_stop_reason or "") != (signed_stop_reason or ""):
        return (f"the run row says {row_phase}" + (f" ({row_stop_reason})" if row_stop_reason else "")
                + f" but the signed checkpoint at generation {signed_generation} says {signed_phase}"
                + (f" ({signed_stop_reason})" if signed_stop_reason else ""))
    return None


def case_rows_disagreement(*, rows: Iterable[tuple[str, str]], signed: Iterable[tuple[str, str]]) -> list[str]:
    """Review case rows whose status differs from the signed checkpoint's case list.

    Args:
        rows: ``(case_id, status)`` of the run's case rows.
        signed: ``(case_id, status)`` of the committed checkpoint's ``review_cases``.

    Returns:
        One finding per case row whose status the checkpoint does not record (a case the
        checkpoint does not list is a row-only case, e.g. a ledger freeze, and is not judged).
    """
    recorded = dict(signed)
    return [f"review case {case_id} row says {status} but the signed checkpoint says {recorded[case_id]}"
            for case_id, status in rows if case_id in recorded and recorded[case_id] != status]
