"""Story: the benchmark runs on a throwaway database and leaves the operator's own untouched.

DESIGN.md section 2.3 has operators run Ratchet on their real database; a benchmark that wrote a few hundred
checkpoints and runs into it would pollute runs lists, recovery statistics and the dashboard.
``manage.py bench`` measures on a scratch database of the same engine -- a temporary SQLite file
under the var dir, or ``<name>_bench`` on the same PostgreSQL server -- and removes it afterwards.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from runtime.bench.scratch import scratch_database_name
from runtime.models import Run
from tests.bench.conftest import BenchRun


@pytest.mark.django_db(transaction=True)
def test_it_leaves_the_users_database_untouched(quick_bench: BenchRun) -> None:
    assert quick_bench.report["metrics"]["checkpoint_commit_ms_at_0"]["samples"] > 0
    assert not Run.objects.filter(task_id__startswith="bench-").exists()
    assert not Run.objects.filter(tenant_id="bench").exists()


@pytest.mark.django_db(transaction=True)
def test_it_removes_its_scratch_database(quick_bench: BenchRun) -> None:
    scratch = quick_bench.report["scratch"]
    if connection.vendor == "sqlite":
        assert scratch.startswith("SQLite file in a temporary directory")
        assert not list(Path(settings.VAR_DIR).glob("bench-*"))
    else:
        name = scratch_database_name(name=connection.settings_dict["NAME"])
        assert name in scratch
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name])
            assert cursor.fetchone()[0] == 0


def test_it_passes_only_the_bench_broker_through_to_its_child(monkeypatch, tmp_path: Path) -> None:
    from runtime.bench.scratch import BROKER_ENV, scratch_env

    monkeypatch.setenv(BROKER_ENV, "redis://127.0.0.1:6379/9")
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    monkeypatch.setenv("RATCHET_HWM_DATABASE_URL", "sqlite:///elsewhere.sqlite3")

    env = scratch_env(scratch_dir=tmp_path, url="sqlite:///bench.sqlite3", marker="m")

    assert env[BROKER_ENV] == "redis://127.0.0.1:6379/9"
    assert "CELERY_BROKER_URL" not in env and "RATCHET_HWM_DATABASE_URL" not in env
