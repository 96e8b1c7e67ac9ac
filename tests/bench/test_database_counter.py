"""The bench's counts are exact: statements, round trips and durable transactions of known work."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from runtime.bench.counting import DatabaseCounter, DatabaseCounts
from runtime.models import Run
from tests.factories import make_state

pytestmark = pytest.mark.django_db(transaction=True)


def a_run_id() -> str:
    from runtime.checkpoints.protocol import run_create

    state = make_state()
    run_create(state=state, worker="counter", ttl_seconds=30)
    return state.identity.run_id


def begin_trips() -> int:
    """The extra round trip psycopg spends on BEGIN (SQLite's BEGIN is a counted statement)."""
    return 1 if connection.vendor == "postgresql" else 0


def test_it_counts_one_durable_transaction_for_a_committed_write() -> None:
    run_id = a_run_id()
    counter = DatabaseCounter()
    with counter.installed():
        with transaction.atomic():
            Run.objects.filter(run_id=run_id).update(stop_reason="")
            Run.objects.filter(run_id=run_id).exists()
    sqlite_begin = 1 if connection.vendor == "sqlite" else 0
    assert counter.counts == DatabaseCounts(
        statements=2 + sqlite_begin, round_trips=2 + sqlite_begin + begin_trips() + 1,
        commits=1, durable_transactions=1, main_durable_transactions=1)


def test_it_counts_no_durable_transaction_for_reads_and_one_per_autocommit_write() -> None:
    run_id = a_run_id()
    counter = DatabaseCounter()
    with counter.installed():
        with transaction.atomic():
            Run.objects.filter(run_id=run_id).exists()
        read_only = counter.snapshot()
        Run.objects.filter(run_id=run_id).update(stop_reason="")  # autocommit: its own transaction
        Run.objects.filter(run_id=run_id).exists()
    assert read_only.durable_transactions == 0 and read_only.commits == 1
    since = counter.snapshot().minus(read_only)
    assert (since.statements, since.round_trips, since.durable_transactions) == (2, 2, 1)


def test_it_stops_counting_when_the_block_ends() -> None:
    run_id = a_run_id()
    counter = DatabaseCounter()
    with counter.installed():
        pass
    Run.objects.filter(run_id=run_id).update(stop_reason="")
    assert counter.counts == DatabaseCounts()


def test_it_counts_the_mark_database_beside_the_main_one() -> None:
    from runtime.database.routers import hwm_alias
    from runtime.models import HighWaterMark

    run_id = a_run_id()
    counter = DatabaseCounter()
    with counter.installed():
        with transaction.atomic():
            Run.objects.filter(run_id=run_id).update(stop_reason="")
        with transaction.atomic(using=hwm_alias()):
            HighWaterMark.objects.using(hwm_alias()).filter(run_id=run_id).update(generation=1)
    assert counter.counts.durable_transactions == 2
    assert counter.counts.commits == 2


def test_it_counts_the_work_of_other_threads() -> None:
    import threading

    from django.db import connections

    run_id = a_run_id()
    counter = DatabaseCounter()

    def elsewhere() -> None:
        try:
            Run.objects.filter(run_id=run_id).update(stop_reason="")
        finally:
            connections.close_all()

    with counter.installed():
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert (counter.counts.statements, counter.counts.durable_transactions) == (1, 1)


def test_it_counts_client_fsyncs_only_while_installed(tmp_path) -> None:
    import os

    counter = DatabaseCounter()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with counter.installed():
            os.write(fd, b"x")
            os.fsync(fd)
            os.fdatasync(fd)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert counter.counts == DatabaseCounts(fsyncs=2)
