"""Workers and queues page: live workers, queue depth, "unknown" when a broker cannot be read,
never a hung page, operators only (DESIGN.md section 6.6). With a broker that has no broadcast
the live workers come from the database: each worker's presence row (DESIGN.md section 5.15)."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from kombu import Connection

import review.queries.workers as workers_module
from runtime.models import Phase, WorkerPresence
from runtime.workers.presence import worker_presence_write
from tests.celery.support import sqlite_broker_url, start_worker
from tests.helpers.procs import wait_for
from tests.review.rows import build_run


def test_it_is_for_operators_only(client_for, personas) -> None:
    url = reverse("review:workers")
    assert client_for("operator").get(url).status_code == 200
    assert client_for("admin").get(url).status_code == 200
    assert client_for("reviewer").get(url).status_code == 403
    assert client_for("stranger").get(url).status_code == 403
    assert client_for("anonymous").get(url).status_code == 302


def test_it_counts_the_messages_waiting_in_the_sqlite_broker(client_for, personas, settings, tmp_path: Path) -> None:
    url = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    settings.CELERY_BROKER_URL = url
    with Connection(url) as conn:
        queue = conn.SimpleQueue(settings.CELERY_TASK_DEFAULT_QUEUE)
        for n in range(3):
            queue.put({"run_id": f"run-{n}"})
        queue.close()
    page = client_for("operator").get(reverse("review:workers")).content.decode()
    assert f'<th scope="row" class="mono">{settings.CELERY_TASK_DEFAULT_QUEUE}</th><td class="num">3</td>' in page
    assert "sqlalchemy broker has no broadcast" in page


def test_an_sqlite_broker_nobody_created_yet_holds_nothing(client_for, personas, settings, tmp_path: Path) -> None:
    path = tmp_path / "fresh.sqlite3"
    path.touch()
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{path}"
    page = client_for("operator").get(reverse("review:workers")).content.decode()
    assert 'class="num">0</td>' in page


def test_it_lists_the_owners_of_recent_leases_without_a_broadcast_broker(
    client_for, personas, checkpoint_keyring, settings, tmp_path: Path
) -> None:
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'b.sqlite3'}"
    build_run(checkpoint_keyring, run_id="run-1", phase=Phase.RUNNING.value, owner_worker="worker-a@host")
    build_run(checkpoint_keyring, run_id="run-2", phase=Phase.PENDING.value, owner_worker="worker-a@host")
    build_run(checkpoint_keyring, run_id="run-3", phase=Phase.RUNNING.value, owner_worker="worker-b@host")
    build_run(checkpoint_keyring, run_id="run-4", phase=Phase.COMPLETED.value, owner_worker="worker-c@host",
              stop_reason="verified")
    view = workers_module.workers_view(user=personas["operator"])
    assert view.workers_source == "database"
    assert {(w.name, w.leased_runs) for w in view.workers} == {("worker-a@host", 2), ("worker-b@host", 1)}


def test_an_unreachable_redis_broker_is_unknown_not_an_error(client_for, personas, settings) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client_for("operator").get(reverse("review:workers"))
    page = response.content.decode()
    assert response.status_code == 200
    assert ">unknown<" in page and "the broker could not be read" in page
    assert "Celery could not be asked" in page or "Celery did not answer" in page


def test_a_broker_that_never_answers_does_not_hang_the_page(
    client_for, personas, settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    release = threading.Event()
    monkeypatch.setattr(workers_module, "_redis_depth", lambda url, queue: release.wait(60))
    monkeypatch.setattr(workers_module, "_celery_workers", lambda: release.wait(60))
    monkeypatch.setattr(workers_module, "PROBE_SECONDS", 0.2)
    try:
        page = client_for("operator").get(reverse("review:workers")).content.decode()
    finally:
        release.set()
    assert "the broker did not answer (no answer within" in page
    assert "Celery did not answer" in page


@pytest.mark.django_db(transaction=True)  # the worker process writes while this test reads
def test_a_running_worker_is_listed_by_its_heartbeat_and_gone_when_it_stops(
    client_for, personas, ratchet_keys, settings, tmp_path: Path
) -> None:
    settings.CELERY_BROKER_URL = broker = sqlite_broker_url(tmp_path)
    worker = start_worker(directory=tmp_path, broker_url=broker, name="present", pool="solo", concurrency=1,
                          env={"RATCHET_WORKER_PRESENCE_SECONDS": "1"})
    try:
        worker.wait_ready(timeout=90)
        wait_for(lambda: WorkerPresence.objects.filter(name__startswith="present@").exists(), timeout=30,
                 what="the worker's presence row")
        row = WorkerPresence.objects.get(name__startswith="present@")
        assert row.pid == worker.proc.pid and row.queues == [settings.CELERY_TASK_DEFAULT_QUEUE]
        page = client_for("operator").get(reverse("review:workers")).content.decode()
        assert f'<th scope="row" class="mono">{row.name}</th><td>database heartbeat</td>' in page
        assert "No live worker found" not in page
    finally:
        worker.stop()
    assert not WorkerPresence.objects.filter(name=row.name).exists(), "a warm shutdown deletes its row"


def test_a_stale_heartbeat_is_not_a_live_worker_and_leases_are_counted_for_their_worker(
    personas, checkpoint_keyring, settings, tmp_path: Path
) -> None:
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'b.sqlite3'}"
    worker_presence_write(name="fresh@host", queues=["ratchet"], pid=11)
    worker_presence_write(name="dead@host", queues=["ratchet"], pid=12)
    WorkerPresence.objects.filter(name="dead@host").update(
        seen_at=WorkerPresence.objects.get(name="dead@host").seen_at - timedelta(hours=1))
    build_run(checkpoint_keyring, run_id="run-1", phase=Phase.RUNNING.value, owner_worker="fresh@host:4242")
    build_run(checkpoint_keyring, run_id="run-2", phase=Phase.RUNNING.value, owner_worker="old@host:7")

    view = workers_module.workers_view(user=personas["operator"])

    rows = {(w.name, w.source, w.leased_runs) for w in view.workers}
    assert ("fresh@host", "database heartbeat", 1) in rows
    assert ("old@host:7", "recent leases", 1) in rows, "a lease no heartbeat accounts for is still shown"
    assert not any(w.name.startswith(("dead@", "fresh@host:")) for w in view.workers)
