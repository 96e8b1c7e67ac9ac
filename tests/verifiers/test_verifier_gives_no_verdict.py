"""Story: the verifier's command times out, does not exist, or would run outside the
environment. No verdict is recorded; the run is frozen for review with stop reason
``verifier_error``, a review case naming the typed error, and (for a timeout) the output so far
attached by digest (DESIGN.md section 6.5). Nothing is executed afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.models import ReviewCase
from tests.engine.support import restore, trace_events
from tests.verifiers.support import python, write_command_task

pytestmark = pytest.mark.django_db(transaction=True)

HANGS = "import time; print('collecting tests', flush=True); time.sleep(60)"


def _frozen(run_id: str) -> tuple[str, dict]:
    report = run_advance(run_id=run_id, worker="w")
    assert (report.phase, report.stop_reason) == ("needs_review", "verifier_error")
    state = restore(run_id).state
    assert state.verifier_results == [] and state.pending is None
    [opened] = trace_events(run_id, "review.opened")
    return ReviewCase.objects.get(run_id=run_id).detail, opened


def test_it_freezes_the_run_when_the_verifier_times_out(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(HANGS), timeout_seconds=1),
                       worker="w")

    detail, opened = _frozen(run_id)

    assert "VerifierCommandTimeoutError" in detail and "process group was killed" in detail
    digest = opened["plugin_error"]["output_digest"]
    assert f"output {digest}" in restore(run_id).state.stop_detail
    assert attachment_get(digest=digest) == b"collecting tests\n"
    assert run_advance(run_id=run_id, worker="w").steps == 0


def test_it_freezes_the_run_when_the_verifier_command_does_not_exist(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=["ratchet-no-such-test-runner"]),
                       worker="w")

    detail, opened = _frozen(run_id)

    assert "VerifierCommandNotFoundError" in detail and "ratchet-no-such-test-runner" in detail
    assert opened["plugin_error"]["type"] == "VerifierCommandNotFoundError"


def test_it_freezes_the_run_when_the_workdir_is_outside_the_allowlist(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=["true"], workdir=".."), worker="w")

    detail, _ = _frozen(run_id)

    assert "VerifierWorkdirError" in detail and "outside the environment target" in detail
