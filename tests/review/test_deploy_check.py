"""``manage.py check --deploy`` is clean with production settings (STYLE.md rule 9)."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check_deploy(tmp_path: Path, **overrides: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RATCHET_", "DJANGO_"))}
    env.pop("DATABASE_URL", None)
    env.update(
        DJANGO_SETTINGS_MODULE="runtime.project.settings",
        RATCHET_VAR_DIR=str(tmp_path),
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        RATCHET_DEBUG="0",
        RATCHET_TLS="1",
        RATCHET_HSTS_PRELOAD="1",
        ALLOWED_HOSTS="ratchet.example.com",
        RATCHET_METRICS_TOKEN=secrets.token_urlsafe(32),
    )
    env.update(overrides)
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_passes_check_deploy_with_production_settings(tmp_path: Path) -> None:
    result = _check_deploy(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_it_flags_insecure_cookies_in_check_deploy(tmp_path: Path) -> None:
    """The check is real: turning TLS off brings the cookie and HSTS warnings back."""
    result = _check_deploy(tmp_path, RATCHET_TLS="0")
    assert result.returncode != 0
    for warning in ("security.W004", "security.W012", "security.W016"):
        assert warning in result.stdout + result.stderr


def test_n15_it_flags_a_metrics_endpoint_without_a_token_in_check_deploy(tmp_path: Path) -> None:
    """N15: without RATCHET_METRICS_TOKEN, /metrics answers every loopback client (everyone behind
    a reverse proxy on the host); ``check --deploy`` says so."""
    result = _check_deploy(tmp_path, RATCHET_METRICS_TOKEN="")
    assert result.returncode != 0
    assert "runtime.W002" in result.stdout + result.stderr
    assert "RATCHET_METRICS_TOKEN" in result.stdout + result.stderr
