"""Story: a plug-in misbehaves and the run fails closed; nothing executes that was not decided.

A planner that raises while proposing, or returns a state too large for a checkpoint, freezes
the run for review with the reason; one that raises while being built never gets a run; a resume
under another version of a plug-in is refused (DESIGN.md section 5.10).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.errors import PluginConstructionError, PluginVersionMismatchError
from runtime.evidence.attachments import attachment_get
from runtime.models import ReviewCase, Run
from tests.engine.support import restore
from tests.plugins.support import notes_task, require_example_package, store

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _installed() -> None:
    require_example_package()


def _fake(tmp_path: Path, name: str) -> Path:
    return notes_task(tmp_path, planner=f'kind = "python"\nentry = "tests.plugins.fakes:{name}"',
                      planner_options="notes = 3", verifier='kind = "always"')


def test_it_freezes_the_run_when_the_planner_raises_while_proposing(tmp_path: Path) -> None:
    run_id = run_start(spec_path=_fake(tmp_path, "RaisesWhileProposing"), worker="w")

    report = run_advance(run_id=run_id, worker="w")

    assert (report.phase, report.stop_reason) == ("needs_review", "planner_failed")
    case = ReviewCase.objects.get(run_id=run_id)
    assert "RuntimeError: the model went away" in case.detail and "nothing was executed" in case.detail
    assert list(store(tmp_path)["data"]) == ["note-1"]  # the first, decided proposal only
    assert restore(run_id).state.planner_state == {"written": 1}  # as committed before the failure
    assert run_advance(run_id=run_id, worker="w").steps == 0


def test_it_creates_no_run_when_the_planner_raises_while_constructing(tmp_path: Path) -> None:
    with pytest.raises(PluginConstructionError, match="ValueError: no API key configured"):
        run_start(spec_path=_fake(tmp_path, "RaisesWhileConstructing"), worker="w")

    assert not Run.objects.exists()


def test_it_freezes_the_run_when_the_planner_state_outgrows_the_limit(tmp_path: Path) -> None:
    run_id = run_start(spec_path=_fake(tmp_path, "OutgrowsItsState"), worker="w")

    report = run_advance(run_id=run_id, worker="w")

    assert (report.phase, report.stop_reason) == ("needs_review", "planner_failed")
    assert "PlannerStateTooLargeError" in ReviewCase.objects.get(run_id=run_id).detail
    assert store(tmp_path)["data"] == {}
    assert restore(run_id).state.pending is None


def test_it_keeps_large_context_in_attachments_by_digest(tmp_path: Path) -> None:
    run_id = run_start(spec_path=_fake(tmp_path, "KeepsContextInAttachments"), worker="w")

    assert run_advance(run_id=run_id, worker="w").phase == "completed"

    state = restore(run_id).state.planner_state
    assert state["written"] == 1 and str(state["context"]).startswith("sha256:")
    assert len(attachment_get(digest=str(state["context"]))) > 64 * 1024


def test_it_refuses_to_resume_under_another_plugin_version(tmp_path: Path) -> None:
    run_id = run_start(spec_path=notes_task(tmp_path, notes=2), worker="w")
    run = Run.objects.get(run_id=run_id)
    run.spec["plugins"]["planner"]["version"] = "0.0.9"  # as if created under an older release
    run.save(update_fields=["spec"])

    with pytest.raises(PluginVersionMismatchError, match="the planner plug-in 'note-taker' is now"):
        run_advance(run_id=run_id, worker="w")

    assert store(tmp_path)["data"] == {}
