"""``manage.py check --deploy`` is clean with exactly the settings the deploy guide documents
(runtime/docs/guides/deploy.md, its ``ratchet.env`` block), and the block is complete: it sets
every variable the production checks need."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tests.deploy.layout import SERVER_DIR, documented_env
from tests.helpers.keys import TestKey
from tests.helpers.procs import ROOT


def _check_deploy(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "DJANGO_", "CELERY_"))}
    clean.pop("DATABASE_URL", None)
    clean.update({name: value.replace(SERVER_DIR, str(tmp_path)) for name, value in env.items()})
    clean.update(DJANGO_SETTINGS_MODULE="runtime.project.settings", RATCHET_VAR_DIR=str(tmp_path / "var"))
    return subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                          cwd=ROOT, env=clean, capture_output=True, text=True, timeout=120)


def test_the_documented_settings_pass_check_deploy(tmp_path: Path, ratchet_keys: dict[str, TestKey]) -> None:
    env = documented_env(ratchet_keys)
    assert env["RATCHET_DEBUG"] == "0" and env["RATCHET_TLS"] == "1"
    assert env["DATABASE_URL"].startswith("postgres://") and env["RATCHET_HWM_DATABASE_URL"].startswith("postgres://")
    servers = {urlsplit(env[name]).hostname for name in ("DATABASE_URL", "RATCHET_HWM_DATABASE_URL")}
    assert len(servers) == 2, "the guide puts the mark store on a server of its own"

    result = _check_deploy(env, tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_leaving_out_the_guides_security_lines_brings_their_warnings_back(
        tmp_path: Path, ratchet_keys: dict[str, TestKey]) -> None:
    """The check is real: without the guide's TLS and metrics-token lines and with a short secret
    key, each one's warning is back."""
    env = {k: v for k, v in documented_env(ratchet_keys).items() if k not in ("RATCHET_TLS", "RATCHET_METRICS_TOKEN")}
    env["DJANGO_SECRET_KEY"] = "short"

    result = _check_deploy(env, tmp_path)

    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W009", "runtime.W002"):
        assert warning in result.stdout + result.stderr, (warning, result.stdout + result.stderr)
