"""Story: ``run_enqueue`` publishes only once the caller's transaction commits (STYLE.md rule 4).

An approval service makes a run live again and calls ``run_enqueue`` inside its transaction. A
worker must never receive the message before the change it announces is visible, and a rolled
back change must not be announced at all. The message is a real one: a worker drives the run
from it to completion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from celery import Celery
from django.db import transaction

from runtime.engine import run_start
from runtime.models import Run
from runtime.workers.dispatch import run_enqueue
from tests.celery.support import Worker, wait_for_phase
from tests.engine.support import key_effects

pytestmark = pytest.mark.django_db(transaction=True)


class Rollback(Exception):
    pass


@contextmanager
def publishing_to(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Celery]:
    """The project's Celery app, publishing to ``url`` instead of the broker under var/."""
    from runtime.project.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options)
    # Celery prefers the environment variable over the setting, so set both.
    monkeypatch.setenv("CELERY_BROKER_URL", url)
    options = {"connect_args": {"timeout": 30}} if url.startswith("sqla+sqlite") else {}
    app.conf.update(broker_url=url, broker_transport_options=options)
    _forget_connections(app)
    try:
        yield app
    finally:
        app.conf.update(broker_url=saved[0], broker_transport_options=saved[1])
        _forget_connections(app)
        monkeypatch.delenv("CELERY_BROKER_URL")


@pytest.fixture
def project_app(broker: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Celery]:
    with publishing_to(broker, monkeypatch) as app:
        yield app


def _forget_connections(app: Celery) -> None:
    app.close()  # the connection pool
    app.amqp._producer_pool = None  # built from the old connection on first publish


def queued(app: Celery) -> int:
    with app.connection_for_write() as conn:
        declared = conn.default_channel.queue_declare(queue="ratchet", durable=True,
                                                      auto_delete=False)
        return declared.message_count


def test_it_publishes_after_commit_and_not_after_rollback(
    replay_task: Path, project_app: Celery, workers: Callable[..., Worker]
) -> None:
    run_id = run_start(spec_path=replay_task)

    with pytest.raises(Rollback), transaction.atomic():
        run_enqueue(run_id=run_id)
        raise Rollback
    assert queued(project_app) == 0

    with transaction.atomic():
        run_enqueue(run_id=run_id)
        assert queued(project_app) == 0
    assert queued(project_app) == 1

    # The idle rule stays out of the way (one long sweep period): the message alone drives it.
    worker = workers(name="approver", env={"RATCHET_SWEEP_SECONDS": "600"})
    assert wait_for_phase(run_id, ("completed", "failed", "needs_review"), timeout=120,
                          workers=[worker]) == "completed"
    effects = key_effects(Path(Run.objects.get(run_id=run_id).spec["target"]))
    assert len(effects) == 5 and set(effects.values()) == {1}


def test_it_keeps_the_callers_commit_when_the_broker_is_down(
    replay_task: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens on port 1: the publish fails after the commit, is logged, and the run
    stays for the sweeper to find as idle."""
    with publishing_to("redis://127.0.0.1:1/0", monkeypatch):
        with transaction.atomic():
            run_id = run_start(spec_path=replay_task)
            run_enqueue(run_id=run_id)

    assert Run.objects.filter(run_id=run_id, phase="running", owner_worker="").exists()
    assert "publish_advance_run" in caplog.text
