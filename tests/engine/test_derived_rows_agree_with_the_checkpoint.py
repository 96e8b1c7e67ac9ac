"""Finding N5: derived rows never win over the signed checkpoint (DESIGN.md section 4.10).

Someone with write access to the main database sets a paused run's row to ``completed``, or a
frozen run's case row to ``replanned``. Nothing may take the row's word for it: ``resume`` and the
worker's task refuse (``DerivedRowMismatchError``, ``restore.refused`` traced) instead of
reporting a finished run or dropping its message, ``checkpoint verify`` and ``verify_bundle``
report the disagreement, and the reviewers' queue keeps the case. Putting the row back lets the
run finish.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from review.queries.cases import case_counts, case_list
from review.queries.live import nav_counts
from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.core.checkpoint import Phase, StopReason
from runtime.core.derived_rows import run_row_disagreement
from runtime.engine import run_advance, run_start
from runtime.errors import DerivedRowMismatchError
from runtime.models import ReviewCase, Run, TraceEvent
from runtime.workers.tasks import advance_run_once
from tests.engine.support import run_target, write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


class _Everyone:
    """A dashboard user who sees every tenant and holds every permission."""

    is_authenticated = True
    is_superuser = True
    is_active = True
    pk = id = None

    def has_perm(self, perm: str) -> bool:
        return True


def _paused_run(tmp_path: Path) -> str:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task"))
    assert run_advance(run_id=run_id, worker="w", max_steps=2).phase in ("running", "pending")
    return run_id


def test_n5_a_run_row_edited_to_completed_stops_nothing_and_is_reported(tmp_path: Path) -> None:
    run_id = _paused_run(tmp_path)
    good_bundle = bundle_export(run_id=run_id, exported_by="test")
    Run.objects.filter(run_id=run_id).update(phase="completed", stop_reason="verified")

    with pytest.raises(DerivedRowMismatchError, match="run row says completed"):
        run_advance(run_id=run_id, worker="w")
    assert advance_run_once(run_id=run_id, generation=None, worker="w") == "needs-human"
    with pytest.raises(DerivedRowMismatchError):
        checkpoint_verify(run_id=run_id)
    refused = TraceEvent.objects.filter(run_id=run_id, event_type="restore.refused")
    assert refused.count() == 2 and refused.first().payload["error"] == "DerivedRowMismatchError"

    edited = {**good_bundle, "run": {**good_bundle["run"], "phase": "completed", "stop_reason": "verified"}}
    findings = bundle_verify(edited)
    assert any(f.startswith("run: the run row says completed (verified) but the signed checkpoint")
               for f in findings), findings
    assert bundle_verify(good_bundle) == []

    Run.objects.filter(run_id=run_id).update(phase=good_bundle["run"]["phase"],
                                             stop_reason=good_bundle["run"]["stop_reason"])
    assert run_advance(run_id=run_id, worker="w").phase == "completed"


def test_n5_a_case_row_edited_to_replanned_stays_in_the_reviewers_queue(tmp_path: Path) -> None:
    run_id = _paused_run(tmp_path)
    (run_target(run_id) / "README.md").write_text("edited by hand behind the run's back\n")
    assert run_advance(run_id=run_id, worker="w").phase == "needs_review"
    case = ReviewCase.objects.get(run_id=run_id)
    user = _Everyone()
    before = (case_counts(user=user)["open"], nav_counts(user=user).cases)

    ReviewCase.objects.filter(pk=case.pk).update(status="replanned")

    listed = list(case_list(user=user, status="open"))
    assert [c.case_id for c in listed] == [case.case_id] and listed[0].awaiting
    assert (case_counts(user=user)["open"], nav_counts(user=user).cases) == before == (1, 1)
    assert case_list(user=user, status="replanned").paginator.count == 0


PHASES = st.sampled_from([p.value for p in Phase])
REASONS = st.sampled_from(["", *(r.value for r in StopReason)])


@given(row_phase=PHASES, row_reason=REASONS, signed_phase=PHASES, signed_reason=REASONS,
       generation=st.integers(min_value=1, max_value=10**6))
def test_n5_a_row_agrees_only_with_what_the_checkpoint_signed(row_phase: str, row_reason: str, signed_phase: str,
                                                              signed_reason: str, generation: int) -> None:
    finding = run_row_disagreement(row_phase=row_phase, row_stop_reason=row_reason, row_generation=generation,
                                   signed_phase=signed_phase, signed_stop_reason=signed_reason,
                                   signed_generation=generation)
    same = (row_phase, row_reason) == (signed_phase, signed_reason)
    row_only_freeze = (row_phase, row_reason) in (("needs_review", "ledger_corrupt"),
                                                  ("needs_review", "restore_refused"))
    assert (finding is None) == (same or row_only_freeze)
    # A row one generation ahead is a commit whose mark is still to be completed: not judged.
    assert run_row_disagreement(row_phase=row_phase, row_stop_reason=row_reason, row_generation=generation + 1,
                                signed_phase=signed_phase, signed_stop_reason=signed_reason,
                                signed_generation=generation) is None
