"""The one clock: the database's time, read by every check that judges an expiry (DESIGN.md section 4.7).

Leases compare expiry with ``Now()`` inside their SQL; checks that run in Python (approval expiry,
decision validity) read the same clock here instead of this machine's, so a worker whose clock is
slow or fast judges nothing differently from its peers.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection


def db_now() -> datetime:
    """The database server's current time (aware UTC), not the start of the transaction.

    Raises:
        django.db.Error: the database cannot be reached (callers fail closed).
    """
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT clock_timestamp()")
        else:
            cursor.execute("SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')")
        (value,) = cursor.fetchone()
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
