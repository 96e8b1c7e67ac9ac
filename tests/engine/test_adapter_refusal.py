"""An adapter refusal that no retry can fix freezes the run for a human instead of escaping."""

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_freezes_the_run_when_the_adapter_refuses_a_write(tmp_path, ratchet_keys):
    spec = write_scripted_task(tmp_path, steps=[
        {"target": "kept.txt", "content": "kept\n"},
        {"target": "never-existed.txt", "delete": True},
    ])
    run_id = run_start(spec_path=spec, worker="worker-a")
    report = run_advance(run_id=run_id, worker="worker-a")
    assert report.phase == "needs_review"
    assert report.stop_reason == "adapter_refused"
    case = ReviewCase.objects.get(run_id=run_id)
    assert case.reason == "adapter_refused"
    assert "never-existed.txt" in case.detail or "delete" in case.detail
    assert (tmp_path / "ws" / "kept.txt").read_text() == "kept\n"
    # Frozen: driving it again does nothing.
    assert run_advance(run_id=run_id, worker="worker-b").steps == 0
