"""The floor every other latency is divided by: one bare 1 KiB ``INSERT`` + ``COMMIT``.

Measured in the same run, on the same scratch database and through the same Django connection
(so with the same durability settings: SQLite WAL with ``synchronous=FULL`` and ``IMMEDIATE``
transactions, or PostgreSQL with its server's ``fsync``), it is the cheapest durable write the
machine can do right now. Dividing by it makes figures from noisy, shared machines comparable:
"a checkpoint commit costs 2x the floor" means the same on a laptop and on a server.
"""

from __future__ import annotations

import itertools
import os
import time

from django.db import connection, transaction

from runtime.bench.report import BenchReport, latency_metric

TABLE = "ratchet_bench_floor"
"""A table of the scratch database only (never migrated anywhere else)."""


def floor_measure(*, report: BenchReport, samples: int) -> float:
    """Time ``samples`` transactions of one 1 KiB ``INSERT`` each (after 3 warm-ups); append the
    metric to ``report`` and return its median in milliseconds."""
    blob_type = "BYTEA" if connection.vendor == "postgresql" else "BLOB"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT PRIMARY KEY, body {blob_type})")
    seconds: list[float] = []
    for i in range(samples + 3):
        body = os.urandom(1024)
        started = time.perf_counter()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"INSERT INTO {TABLE} (id, body) VALUES (%s, %s)", [i, body])
        elapsed = time.perf_counter() - started
        if i >= 3:
            seconds.append(elapsed)
    metric = latency_metric("floor_insert_commit_ms", "floor: bare 1 KiB INSERT + COMMIT", seconds)
    report.metrics.append(metric)
    report.facts["floor_ms"] = round(metric.median, 4)
    return metric.median


_IDS = itertools.count(10**9)
"""Keys of :func:`floor_sample`'s rows, clear of :func:`floor_measure`'s."""


def floor_sample() -> float:
    """One more floor transaction (after :func:`floor_measure` made the table); its seconds.

    For sections that interleave the floor with what they measure (``runtime.bench.checkpoints``).
    """
    row_id = next(_IDS)
    body = os.urandom(1024)
    started = time.perf_counter()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {TABLE} (id, body) VALUES (%s, %s)", [row_id, body])
    return time.perf_counter() - started
