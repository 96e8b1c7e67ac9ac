"""``manage.py export-bundle RUN_ID --out FILE`` writes the bundle and ``manage.py verify-bundle
FILE`` checks it offline: exit 0 "bundle verifies", non-zero listing what failed, and no database
needed -- only the checkpoint keyring (issue: "`manage.py verify-bundle FILE` checks offline")."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tests.helpers.procs import child_env, run_manage
from tests.review.rows import build_run


@pytest.fixture
def exported(checkpoint_keyring, db, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    build_run(checkpoint_keyring, run_id="run-cli", generations=2, events=5)
    out = tmp_path / "bundle.json"
    call_command("export-bundle", "run-cli", "--out", str(out), "--by", "ops", stderr=StringIO())
    return out


def test_it_exports_and_verifies_a_bundle(exported: Path) -> None:
    assert json.loads(exported.read_text())["exported_by"] == "ops"
    out = StringIO()
    call_command("verify-bundle", str(exported), stdout=out)
    assert out.getvalue().strip() == (
        "bundle verifies: run run-cli, committed generation 2, 5 trace events"
    )


def test_it_fails_listing_every_finding(exported: Path) -> None:
    bundle = json.loads(exported.read_text())
    bundle["trace"][1]["event_type"] = "something.else"
    exported.write_text(json.dumps(bundle))
    with pytest.raises(CommandError) as failure:
        call_command("verify-bundle", str(exported))
    message = str(failure.value)
    assert message.startswith("bundle does NOT verify (run run-cli):")
    assert "  - signature: MAC does not verify" in message
    assert "  - trace: event seq 2 was altered after it was written" in message


def test_it_says_when_the_file_is_not_a_bundle(tmp_path: Path, db) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(CommandError, match="the file is not JSON"):
        call_command("verify-bundle", str(path))


def test_it_verifies_in_a_process_that_has_no_database(exported: Path, tmp_path: Path) -> None:
    env = child_env(
        DATABASE_URL="postgres://nobody@127.0.0.1:9/no_such_database",
        RATCHET_KEY_FILE=str(tmp_path / "no-key-file.json"),
    )
    ok = run_manage("verify-bundle", str(exported), env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("bundle verifies: run run-cli")
    assert not (tmp_path / "no-key-file.json").exists(), "the offline check never creates keys"

    bundle = json.loads(exported.read_text())
    bundle["high_water_mark"]["generation"] = 1
    exported.write_text(json.dumps(bundle))
    bad = run_manage("verify-bundle", str(exported), env=env)
    assert bad.returncode == 1
    assert "committed checkpoint: its generation is not the high-water mark's" in bad.stderr


def test_export_refuses_an_unknown_run(db) -> None:
    with pytest.raises(CommandError, match="run not found"):
        call_command("export-bundle", "no-such-run")
