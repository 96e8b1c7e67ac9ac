"""The floors every other latency is divided by: the cheapest durable writes the machine can do.

* the **one-statement floor**: one bare 1 KiB ``INSERT`` + ``COMMIT`` on the main database;
* the **two-store floor**: that, then one ``UPDATE`` + ``COMMIT`` of a one-row table on the
  high-water mark store's database (DESIGN.md section 4.2). A checkpoint advance commits on
  both databases (the main transaction, the commit point, then the mark's compare-and-set,
  DESIGN.md section 4.3), so two sequential durable commits on two databases is the least an
  advance can cost; its ratio to this floor is what the protocol adds on top of that.

Measured in the same run, on the same scratch databases and through the same Django connections
(so with the same durability settings: SQLite WAL with ``synchronous=FULL`` and ``IMMEDIATE``
transactions, or PostgreSQL with its server's ``fsync``). Dividing by them makes figures from
noisy, shared machines comparable: "a checkpoint commit costs 2x the floor" means the same on a
laptop and on a server.
"""

from __future__ import annotations

import itertools
import os
import time

from django.db import connection, connections, transaction

from runtime.bench.report import BenchReport, latency_metric
from runtime.database.routers import hwm_alias

TABLE = "ratchet_bench_floor"
"""A table of the scratch database only (never migrated anywhere else)."""

MARK_TABLE = "ratchet_bench_floor_mark"
"""A one-row table of the scratch high-water mark database only: the two-store floor's UPDATE."""


def _floor_tables() -> None:
    blob_type = "BYTEA" if connection.vendor == "postgresql" else "BLOB"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT PRIMARY KEY, body {blob_type})")
    with connections[hwm_alias()].cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {MARK_TABLE} (id INTEGER PRIMARY KEY, "
                       "generation BIGINT NOT NULL)")
        cursor.execute(f"DELETE FROM {MARK_TABLE}")
        cursor.execute(f"INSERT INTO {MARK_TABLE} (id, generation) VALUES (1, 0)")


def floor_measure(*, report: BenchReport, samples: int) -> float:
    """Time ``samples`` one-statement floors and as many two-store floors, interleaved (after 3
    warm-ups of each); append both metrics to ``report`` and return the one-statement floor's
    median in milliseconds (the ``x floor`` divisor of every table)."""
    _floor_tables()
    seconds: list[float] = []
    two_store: list[float] = []
    for i in range(samples + 3):
        one = floor_sample()
        two = two_store_floor_sample()
        if i >= 3:
            seconds.append(one)
            two_store.append(two)
    metric = latency_metric("floor_insert_commit_ms", "floor: bare 1 KiB INSERT + COMMIT", seconds)
    two = latency_metric("floor_two_store_ms", "two-store floor: INSERT + COMMIT, then UPDATE + "
                         "COMMIT on the mark's database", two_store, floor_ms=metric.median)
    report.metrics += [metric, two]
    report.facts["floor_ms"] = round(metric.median, 4)
    report.facts["floor_two_store_ms"] = round(two.median, 4)
    return metric.median


_IDS = itertools.count(10**9)
"""Keys of :func:`floor_sample`'s rows."""


def floor_sample() -> float:
    """One floor transaction (a 1 KiB ``INSERT`` + ``COMMIT`` on the main database); its seconds.

    For sections that interleave the floor with what they measure (``runtime.bench.checkpoints``).
    """
    row_id = next(_IDS)
    body = os.urandom(1024)
    started = time.perf_counter()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {TABLE} (id, body) VALUES (%s, %s)", [row_id, body])
    return time.perf_counter() - started


def two_store_floor_sample() -> float:
    """One two-store floor (after :func:`floor_measure` made the tables): a 1 KiB ``INSERT`` +
    ``COMMIT`` on the main database, then ``UPDATE`` + ``COMMIT`` on the mark's; its seconds."""
    row_id = next(_IDS)
    body = os.urandom(1024)
    alias = hwm_alias()
    started = time.perf_counter()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {TABLE} (id, body) VALUES (%s, %s)", [row_id, body])
    with transaction.atomic(using=alias):
        with connections[alias].cursor() as cursor:
            cursor.execute(f"UPDATE {MARK_TABLE} SET generation = generation + 1 WHERE id = 1")
    return time.perf_counter() - started
