"""Story: the planner is done, the test command fails, and the run ends ``failed``.

What the run, the checkpoint and the trace then say (DESIGN.md section 6.5): phase ``failed``
with stop reason ``verifier_failed``; a signed ``VerifierResult`` that failed at the final
environment version and fingerprint and names the output attachment; a ``verifier.failed``
event with the same digest; and the command's output stored under it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.models import Attachment
from tests.engine.support import restore, trace_events, trace_types
from tests.verifiers.support import CHECK_ANSWER, python, write_command_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_ends_the_run_failed_with_the_command_output_attached(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(CHECK_ANSWER), content="41\n"),
                       worker="w")

    report = run_advance(run_id=run_id, worker="w")

    assert (report.phase, report.stop_reason) == ("failed", "verifier_failed")
    [event] = trace_events(run_id, "verifier.failed")
    digest = event["output_digest"]
    assert attachment_get(digest=digest) == b"answer.txt holds '41\\n'\n"
    assert Attachment.objects.get(digest=digest).content_type.startswith("text/plain")
    types = trace_types(run_id)
    at = types.index("verifier.failed")
    assert types[at:at + 3] == ["verifier.failed", "audit.effects", "run.failed"]
    state = restore(run_id).state
    [result] = state.verifier_results
    assert not result.passed and f"output {digest}" in result.detail and "exited 1" in result.detail
    assert (result.environment_version, result.environment_fingerprint) == (
        state.environment.version, state.environment.state_fingerprint)
    assert (event["environment_version"], event["environment_fingerprint"]) == (
        state.environment.version, state.environment.state_fingerprint)
    assert state.stop_detail == result.detail


def test_it_never_resumes_a_run_whose_verifier_failed(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(CHECK_ANSWER), content="41\n"),
                       worker="w")
    run_advance(run_id=run_id, worker="w")

    again = run_advance(run_id=run_id, worker="w")

    assert (again.phase, again.steps) == ("failed", 0)
    assert len(trace_events(run_id, "verifier.failed")) == 1
