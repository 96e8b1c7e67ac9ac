"""Story: an operator runs ``manage.py replay_check REPO RANGE --json`` and gets one JSON report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.replay_check.repository import replay_range
from tests.helpers.procs import database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_prints_one_json_report_and_exits_0_when_every_check_passes(
    tmp_path: Path, case_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_url())  # the children use the test database
    out = io.StringIO()

    call_command("replay_check", str(case_repo), "--kills", "1", "--seed", "5", "--lease-seconds", "1",
                 "--no-baseline", "--json", "--workdir", str(tmp_path / "check"), stdout=out, stderr=io.StringIO())

    report = json.loads(out.getvalue())
    assert report["passed"] is True, report
    commits = len(replay_range(case_repo).commits)
    assert (report["commits"], report["target_commits"], report["duplicates"]) == (commits, commits, 0)
    assert report["range"].count("..") == 1 and report["baseline_ms_per_commit"] is None


def test_it_exits_1_for_a_range_the_repository_does_not_have(tmp_path: Path, case_repo: Path) -> None:
    with pytest.raises(CommandError) as raised:
        call_command("replay_check", str(case_repo), "last:100000", "--workdir", str(tmp_path / "check"),
                     stdout=io.StringIO())

    assert raised.value.returncode == 1 and "first-parent commits" in str(raised.value)
