"""Story: the shipped ``runtime/task_specs/command_check.toml`` runs and its command passes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.evidence.attachments import attachment_get
from runtime.taskspec.loading import SHIPPED_TASKS_DIR
from tests.engine.support import trace_events

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_completes_the_shipped_command_task(tmp_path: Path) -> None:
    if shutil.which("python3") is None:
        pytest.skip("the shipped task runs python3 from PATH")
    copy = tmp_path / "runtime" / "task_specs" / "command_check.toml"  # its target is ../../var/...
    copy.parent.mkdir(parents=True)
    shutil.copy(SHIPPED_TASKS_DIR / "command_check.toml", copy)
    (tmp_path / "var" / "command-workspace").mkdir(parents=True)  # as its header says
    run_id = run_start(spec_path=copy, worker="w")

    report = run_advance(run_id=run_id, worker="w")

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    [event] = trace_events(run_id, "verifier.passed")
    assert attachment_get(digest=event["output_digest"]) == b"Hello, Ratchet!\n"
    assert not (tmp_path / "var" / "command-workspace" / "__pycache__").exists()
