"""Story: the Celery configuration a platform engineer relies on without running ``inspect``.

Tasks are registered under stable names, acknowledged late, JSON only, never eager; retries are
for connection-class errors only; the sweeper is on the beat schedule; the broker options suit
the broker (a Redis visibility timeout longer than the lease; nothing the SQLAlchemy transport
would hand to ``create_engine`` by mistake); malformed knobs fail loudly.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy
from django.conf import settings
from kombu import Connection

import runtime.project.settings as settings_module
from runtime.errors import RatchetError
from runtime.project.celery import BrokerPolling, app
from runtime.workers.dispatch import run_enqueue
from runtime.workers.tasks import CONNECTION_ERRORS, advance_run, advance_runs, sweep_expired_leases
from tests.helpers.procs import ROOT, child_env


def test_it_registers_the_tasks_under_stable_names() -> None:
    assert app.tasks["ratchet.advance_run"] is advance_run._get_current_object()
    assert app.tasks["ratchet.sweep"] is sweep_expired_leases._get_current_object()
    assert app.tasks["ratchet.advance_runs"] is advance_runs._get_current_object()
    assert callable(run_enqueue)


def test_it_acknowledges_late_and_keeps_no_results() -> None:
    for task in (advance_run, advance_runs, sweep_expired_leases):
        assert task.acks_late is True
        assert task.ignore_result is True
    assert app.conf.task_acks_late is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_always_eager is False
    assert app.conf.broker_connection_retry_on_startup is True


def test_it_speaks_only_json() -> None:
    assert app.conf.task_serializer == "json"
    assert list(app.conf.accept_content) == ["json"]


def test_it_retries_only_connection_errors_and_not_forever() -> None:
    assert set(advance_run.autoretry_for) == set(CONNECTION_ERRORS)
    assert not any(issubclass(error, RatchetError) for error in CONNECTION_ERRORS)
    assert 0 < advance_run.max_retries <= 5
    assert advance_run.retry_backoff


def test_it_sweeps_on_the_beat_schedule() -> None:
    entry = app.conf.beat_schedule["ratchet.sweep"]
    assert entry["task"] == "ratchet.sweep"
    assert entry["schedule"] == settings.RATCHET_SWEEP_SECONDS
    assert entry["options"]["expires"] >= 3 * settings.RATCHET_SWEEP_SECONDS


def test_it_keeps_redis_messages_invisible_for_longer_than_a_lease() -> None:
    options = settings_module._broker_transport_options("redis://127.0.0.1:6379/0")
    assert options["visibility_timeout"] > settings.RATCHET_LEASE_SECONDS


def test_it_hands_the_sqlalchemy_transport_only_engine_arguments(tmp_path: Path) -> None:
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    options = settings_module._broker_transport_options(url)

    # kombu passes every transport option to create_engine(): it must accept them all.
    sqlalchemy.create_engine(url.removeprefix("sqla+"), **options).dispose()
    assert "polling_interval" not in options


def test_it_polls_the_sqlalchemy_broker_more_often_than_once_a_second(tmp_path: Path) -> None:
    sql = Connection(f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}")
    redis = Connection("redis://127.0.0.1:6379/0")
    redis_default = redis.transport.polling_interval

    for connection in (sql, redis):
        BrokerPolling(SimpleNamespace(steps=[])).start(SimpleNamespace(connection=connection))

    assert sql.transport.polling_interval == settings.RATCHET_BROKER_POLL_SECONDS < 1.0
    assert redis.transport.polling_interval == redis_default
    assert BrokerPolling in app.steps["consumer"]


def test_it_gives_lost_messages_back_except_on_the_sqlalchemy_broker() -> None:
    assert settings_module._reject_on_worker_lost("redis://127.0.0.1:6379/0") is True
    assert settings_module._reject_on_worker_lost("amqp://guest@127.0.0.1//") is True
    assert settings_module._reject_on_worker_lost("sqla+sqlite:///var/broker.sqlite3") is False
    assert app.conf.task_reject_on_worker_lost is settings_module._reject_on_worker_lost(
        settings.CELERY_BROKER_URL)


@pytest.mark.parametrize(("variable", "value"), [
    ("RATCHET_SWEEP_SECONDS", "0"),
    ("RATCHET_SWEEP_SECONDS", "soon"),
    ("RATCHET_STEPS_PER_TASK", "0"),
    ("RATCHET_BROKER_VISIBILITY_SECONDS", "10"),
    ("RATCHET_TASK_SLICE_SECONDS", "0"),
    ("RATCHET_TASK_MAX_SECONDS", "1"),
])
def test_it_refuses_a_malformed_knob_by_name(variable: str, value: str) -> None:
    done = subprocess.run([sys.executable, "-c", "import runtime.project.settings"],
                          env=child_env(**{variable: value, "RATCHET_LEASE_SECONDS": "30"}),
                          cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and variable in done.stderr
