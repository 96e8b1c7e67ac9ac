"""Story: the test command passes at the final version and the run completes.

Completion evidence (DESIGN.md section 6.5): the passing ``VerifierResult`` is bound to the
final environment version and fingerprint, and the ``verifier.passed`` event names the output
digest the result's detail names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from tests.engine.support import restore, trace_events
from tests.verifiers.support import CHECK_ANSWER, python, write_command_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_completes_only_on_a_pass_at_the_final_version(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(CHECK_ANSWER)), worker="w")

    report = run_advance(run_id=run_id, worker="w")

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    state = restore(run_id).state
    [result] = state.verifier_results
    assert result.passed and result.environment_version == state.environment.version == "w1"
    assert result.environment_fingerprint == state.environment.state_fingerprint
    [event] = trace_events(run_id, "verifier.passed")
    assert f"output {event['output_digest']}" in result.detail
    assert attachment_get(digest=event["output_digest"]) == b"answer.txt holds '42\\n'\n"


def test_it_freezes_when_the_command_changes_what_it_verified(tmp_path: Path) -> None:
    script = CHECK_ANSWER.replace("sys.exit(", "pathlib.Path('report.xml').write_text('<ok/>')\nsys.exit(")
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(script)), worker="w")

    report = run_advance(run_id=run_id, worker="w")

    assert (report.phase, report.stop_reason) == ("needs_review", "environment_drift")
    state = restore(run_id).state
    assert state.verifier_results == []  # a pass about a version that no longer exists is no evidence
    assert "changed while the verifier ran" in state.stop_detail
    [opened] = trace_events(run_id, "review.opened")
    assert opened["output_digest"].startswith("sha256:")
