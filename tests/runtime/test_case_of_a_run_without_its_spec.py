"""Story: a reviewer opens an open case whose run has lost its stored task spec.

Opening the case prepares the binding a decision would be signed over, which opens the run's
adapter from the spec stored with the run (``runtime.checkpoints.session.adapter_for_run``). A run whose row
holds no spec (edited by hand, or written by another tool) used to raise ``KeyError: 'task'``
there, a 500 on the case page. It is now a typed ``RunSpecMissingError`` naming the run and what
is missing, and the case page shows it as the reason no decision can be prepared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from review.queries.cases import case_get
from runtime.decisions.reviews import decision_prepare
from runtime.engine import run_advance, run_start
from runtime.errors import RunSpecMissingError
from runtime.models import ReviewCase, Run
from tests.engine.support import run_target, write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def frozen_case(tmp_path: Path) -> tuple[str, str]:
    """``(run_id, case_id)`` of a run frozen for review by an edit behind its back."""
    run_id = run_start(spec_path=write_scripted_task(tmp_path))
    run_advance(run_id=run_id, max_steps=2)
    (run_target(run_id) / "README.md").write_text("edited by hand behind the run's back\n")
    assert run_advance(run_id=run_id).phase == "needs_review"
    return run_id, ReviewCase.objects.get(run_id=run_id, status="open").case_id


@pytest.mark.parametrize(("spec", "missing"), [({}, "task, target"), ({"target": "/nowhere"}, "task")])
def test_it_names_the_run_and_the_missing_spec_instead_of_a_key_error(frozen_case: tuple[str, str],
                                                                      spec: dict[str, str], missing: str) -> None:
    run_id, case_id = frozen_case
    Run.objects.filter(run_id=run_id).update(spec=spec)

    with pytest.raises(RunSpecMissingError) as caught:
        decision_prepare(case_id=case_id)

    assert caught.value.context == {"run_id": run_id, "missing": missing}
    assert "the run has no stored task spec" in str(caught.value)


def test_the_case_page_shows_why_no_decision_can_be_prepared(frozen_case: tuple[str, str]) -> None:
    run_id, case_id = frozen_case
    Run.objects.filter(run_id=run_id).update(spec={})

    detail = case_get(case_id=case_id)

    assert detail.binding is None
    assert f"run_id={run_id}" in detail.binding_error and "missing=task, target" in detail.binding_error
