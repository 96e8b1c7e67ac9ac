"""Story: a script trusts ``run`` and ``resume`` exit codes; only a completed run exits 0.

Each outcome a run can reach has its own documented code (``runtime.decisions.verdicts``): 3 failed,
4 cancelled, 5 needs_review (frozen for a human), 6 awaiting_approval, 7 unfinished
(``--max-steps``), 1 when the command could not drive the run at all, 2 for usage. ``--json``
prints the verdict as exactly one JSON object on stdout; the run id line goes to stderr.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.decisions.cancellation import run_request_cancel
from runtime.decisions.verdicts import RunExit
from tests.engine.support import run_target, write_scripted_task
from tests.helpers.procs import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _call(*args: str) -> tuple[int, dict[str, Any], str]:
    """Run a command in this process with ``--json``: ``(exit code, the one JSON object, stderr)``."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(*args, "--json", "--no-progress", stdout=out, stderr=err)
        code = 0
    except CommandError as exc:
        code = exc.returncode
    return code, json.loads(out.getvalue()), err.getvalue()  # json.loads: exactly one object


def test_it_exits_0_only_for_a_completed_run(tmp_path: Path) -> None:
    code, verdict, err = _call("run", str(write_scripted_task(tmp_path)))

    assert code == RunExit.COMPLETED == 0
    assert (verdict["outcome"], verdict["phase"], verdict["stop_reason"]) == ("completed", "completed", "verified")
    assert verdict["exit_code"] == 0 and verdict["writes"] == 5
    assert err.startswith(f"run {verdict['run_id']}")


def test_it_exits_3_when_the_run_failed(tmp_path: Path) -> None:
    task = write_scripted_task(tmp_path, [{"target": "a.txt", "content": "written\n"}],
                               files={"a.txt": "what the verifier expects\n"})

    code, verdict, _ = _call("run", str(task))

    assert code == RunExit.FAILED == 3
    assert (verdict["phase"], verdict["stop_reason"], verdict["exit_code"]) == ("failed", "verifier_failed", 3)


def test_it_exits_7_when_stopped_early_and_4_once_an_operator_cancelled(tmp_path: Path) -> None:
    code, first, _ = _call("run", str(write_scripted_task(tmp_path)), "--max-steps", "1")
    assert code == RunExit.UNFINISHED == 7
    assert first["outcome"] == "unfinished" and first["phase"] in ("running", "pending")

    run_request_cancel(run_id=first["run_id"], requested_by="operator@example.org")
    code, verdict, _ = _call("resume", first["run_id"])

    assert code == RunExit.CANCELLED == 4
    assert (verdict["phase"], verdict["outcome"]) == ("cancelled", "cancelled")


def test_it_exits_5_when_the_run_is_frozen_for_a_human(tmp_path: Path) -> None:
    _, first, _ = _call("run", str(write_scripted_task(tmp_path)), "--max-steps", "2")
    (run_target(first["run_id"]) / "README.md").write_text("edited by hand behind the run's back\n")

    code, verdict, _ = _call("resume", first["run_id"])

    assert code == RunExit.NEEDS_REVIEW == 5
    assert (verdict["phase"], verdict["stop_reason"]) == ("needs_review", "environment_drift")


def test_it_prints_why_the_run_froze_above_the_verdict(tmp_path: Path) -> None:
    _, first, _ = _call("run", str(write_scripted_task(tmp_path)), "--max-steps", "2")
    (run_target(first["run_id"]) / "README.md").write_text("edited by hand behind the run's back\n")
    out = io.StringIO()

    with pytest.raises(CommandError) as caught:
        call_command("resume", first["run_id"], "--no-progress", stdout=out, stderr=io.StringIO())

    reason, verdict = out.getvalue().strip().splitlines()[-2:]
    assert caught.value.returncode == RunExit.NEEDS_REVIEW
    assert reason.startswith("reason: environment content changed"), reason
    assert verdict.startswith("verdict: needs_review (environment_drift)")


def test_it_exits_6_while_the_run_waits_for_an_approval(tmp_path: Path) -> None:
    task = write_scripted_task(tmp_path, [{"target": "limits.toml", "content": "max = 3\n", "risk": "high"}],
                               approval_risks=("high",))

    code, verdict, _ = _call("run", str(task))

    assert code == RunExit.AWAITING_APPROVAL == 6
    assert (verdict["phase"], verdict["stop_reason"]) == ("awaiting_approval", "approval_required")


def test_it_exits_1_with_a_json_error_when_it_cannot_drive_the_run() -> None:
    code, verdict, _ = _call("resume", "no-such-run")

    assert code == RunExit.ERROR == 1
    assert verdict == {"run_id": "no-such-run", "outcome": "error", "exit_code": 1, "error": "RunNotFoundError",
                       "message": verdict["message"], "retryable": False}
    assert "run not found" in verdict["message"]


def test_the_process_exit_codes_are_the_documented_ones(tmp_path: Path) -> None:
    task = write_scripted_task(tmp_path, [{"target": "limits.toml", "content": "max = 3\n", "risk": "high"}],
                               approval_risks=("high",))

    waiting = run_manage("run", str(task), "--json", "--no-progress")
    usage = run_manage("run")
    helped = run_manage("resume", "--help")

    assert waiting.returncode == 6, waiting.stderr
    verdict = json.loads(waiting.stdout)
    assert verdict["outcome"] == "awaiting_approval"
    assert waiting.stderr.startswith(f"run {verdict['run_id']}")
    assert usage.returncode == 2
    assert "5 needs_review" in " ".join(helped.stdout.split())
