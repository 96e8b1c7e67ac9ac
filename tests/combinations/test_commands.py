"""Story: an operator registers, regresses, promotes and inspects combinations from the command
line (DESIGN.md sections 8.4 and 8.5)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import runtime.regression.replay
from runtime.engine import run_start
from runtime.models import RegressRecord
from runtime.rollout.combinations import combination_of_run, combination_register
from tests.engine.support import write_scripted_task
from tests.helpers.procs import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_registers_regresses_and_shows_a_combination(tmp_path: Path) -> None:
    spec = write_scripted_task(tmp_path / "task")
    registered = run_manage("combinations", "register", str(spec), "--state", "active", "--by", "ops",
                            "--reason", "first deploy")
    assert registered.returncode == 0, registered.stderr
    combination_id = registered.stdout.split()[0]

    run_id = run_start(spec_path=spec)
    regressed = run_manage("regress", combination_id[:20], timeout=300)
    shown = run_manage("combinations", "show", combination_id[:20])
    listed = run_manage("combinations", "list")

    assert combination_of_run(run_id=run_id).combination_id == combination_id
    assert regressed.returncode == 0, regressed.stderr
    assert [line.split()[:2] for line in regressed.stdout.splitlines()[1:]] == [
        [g, "pass"] for g in runtime.regression.replay.GROUPS]
    assert RegressRecord.objects.get(combination_id=combination_id).passed
    assert "registered by ops: first deploy" in shown.stdout and "regress.passed" in shown.stdout
    assert f"in flight: {run_id}" in shown.stdout
    assert combination_id[:19] in listed.stdout and "active" in listed.stdout


def test_it_exits_non_zero_and_records_a_failure_on_a_mismatch(tmp_path: Path, monkeypatch) -> None:
    spec = write_scripted_task(tmp_path / "task")
    first = run_start(spec_path=spec)
    fields = dict(combination_of_run(run_id=first).fields, code_version="next")
    canary = combination_register(fields=fields, actor="ops", reason="next build").combination_id
    fixtures = tmp_path / "fixtures"
    shutil.copytree(runtime.regression.replay.FIXTURES, fixtures)
    normal = json.loads((fixtures / "normal.json").read_text())
    normal["output"]["writes"] = 4
    (fixtures / "normal.json").write_text(json.dumps(normal))
    monkeypatch.setattr(runtime.regression.replay, "FIXTURES", fixtures)

    with pytest.raises(CommandError) as failed:
        call_command("regress", canary, "--group", "normal")

    assert failed.value.returncode == 1
    record = RegressRecord.objects.get(combination_id=canary)
    assert not record.passed and record.results[0]["mismatches"] == ["output"]


def test_it_refuses_to_promote_from_the_command_line_without_a_regress(tmp_path: Path) -> None:
    first = run_start(spec_path=write_scripted_task(tmp_path / "task"))
    fields = dict(combination_of_run(run_id=first).fields, code_version="next")
    canary = combination_register(fields=fields, actor="ops", reason="next build").combination_id

    refused = run_manage("combinations", "promote", canary, "--by", "ops", "--reason", "ship it")

    assert refused.returncode == 1
    assert "CombinationStateError" in refused.stderr and "regress" in refused.stderr
