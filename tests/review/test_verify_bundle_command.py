"""``manage.py export_bundle RUN_ID --out FILE`` writes the bundle and ``manage.py verify_bundle
FILE`` checks it offline: exit 0 "bundle verifies", non-zero listing what failed, and no database
needed -- only public keys, ``--public-keys`` from ``manage.py keys export-public`` (DESIGN.md
section 4.8)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from runtime.core.signing import TrustRoot
from tests.helpers.keys import TestKey
from tests.helpers.procs import child_env, run_manage
from tests.review.rows import build_run


@pytest.fixture(autouse=True)
def _keys(all_root_keys) -> dict[str, TestKey]:  # type: ignore[no-untyped-def]
    return all_root_keys


@pytest.fixture
def exported(checkpoint_keyring, db, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    build_run(checkpoint_keyring, run_id="run-cli", generations=2, events=5)
    out = tmp_path / "bundle.json"
    call_command("export_bundle", "run-cli", "--out", str(out), "--by", "ops", stderr=StringIO())
    return out


def test_it_exports_and_verifies_a_bundle(exported: Path) -> None:
    assert json.loads(exported.read_text())["exported_by"] == "ops"
    out = StringIO()
    call_command("verify_bundle", str(exported), stdout=out)
    assert out.getvalue().strip() == (
        "bundle verifies: run run-cli, committed generation 2, 5 trace events"
    )


def test_it_fails_listing_every_finding(exported: Path) -> None:
    bundle = json.loads(exported.read_text())
    bundle["trace"][1]["event_type"] = "something.else"
    exported.write_text(json.dumps(bundle))
    with pytest.raises(CommandError) as failure:
        call_command("verify_bundle", str(exported))
    message = str(failure.value)
    assert message.startswith("bundle does NOT verify (run run-cli):")
    assert "  - signature: signature does not verify" in message
    assert "  - trace: event seq 2 was altered after it was written" in message


def test_it_says_when_the_file_is_not_a_bundle(tmp_path: Path, db) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(CommandError, match="the file is not JSON"):
        call_command("verify_bundle", str(path))


def test_it_verifies_in_a_process_that_has_no_database(
    exported: Path, tmp_path: Path, _keys: dict[str, TestKey]
) -> None:
    public_keys = tmp_path / "pub.json"
    written = run_manage("keys", "export-public", "--out", str(public_keys))
    assert written.returncode == 0, written.stderr
    text = public_keys.read_bytes()
    for key in _keys.values():  # not one private key (nor the checkpoint key) is handed over
        assert not any(form in text for form in key.leak_forms())
    # An auditor's process: no database, no key of any root configured, no key file.
    env = child_env(
        **{f"RATCHET_{root.value.upper()}_{kind}": None
           for root in TrustRoot for kind in ("KEYS", "PUBLIC_KEYS")},
        DATABASE_URL="postgres://nobody@127.0.0.1:9/no_such_database",
        RATCHET_KEY_FILE=str(tmp_path / "no-key-file.json"),
    )
    ok = run_manage("verify_bundle", str(exported), "--public-keys", str(public_keys), env=env)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("bundle verifies: run run-cli")
    assert not (tmp_path / "no-key-file.json").exists(), "the offline check never creates keys"

    without_keys = run_manage("verify_bundle", str(exported), env=env)
    assert without_keys.returncode != 0, "no public keys, no verdict"
    assert "bundle verifies" not in without_keys.stdout
    assert "Traceback" not in without_keys.stderr, "a missing key is named, not a crash"
    assert not (tmp_path / "no-key-file.json").exists(), "the offline check never creates keys"

    bundle = json.loads(exported.read_text())
    bundle["high_water_mark"]["generation"] = 1
    exported.write_text(json.dumps(bundle))
    bad = run_manage("verify_bundle", str(exported), "--public-keys", str(public_keys), env=env)
    assert bad.returncode == 1
    assert "  - signature: signature does not verify" in bad.stderr
    assert "committed checkpoint: its generation is not the high-water mark's" in bad.stderr


def test_export_refuses_an_unknown_run(db) -> None:
    with pytest.raises(CommandError, match="run not found"):
        call_command("export_bundle", "no-such-run")
