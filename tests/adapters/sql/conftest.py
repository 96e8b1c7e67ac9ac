"""Fixtures for the SQL adapter stories: a target database of each kind, with an ``orders`` table.

``target`` runs a story on SQLite and on PostgreSQL; the PostgreSQL case carries the ``postgres``
marker, so it runs in the PostgreSQL pass (``DATABASE_URL`` pointing at a server), on a database
of its own created for the test and dropped after it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.adapters.sql.support import (
    ORDERS_DDL,
    SECRET_ENV,
    Target,
    postgres_target_create,
    postgres_target_drop,
)

TEST_REDACTION_KEY = "redact-test:" + base64.b64encode(bytes(range(32))).decode()


@pytest.fixture(autouse=True)
def redaction_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fixed redaction key and the secret inputs, for this process and its children."""
    monkeypatch.setenv("RATCHET_REDACTION_KEY", TEST_REDACTION_KEY)
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    return TEST_REDACTION_KEY


def _sqlite_target(tmp_path: Path) -> Target:
    target = Target(kind="sqlite", url=f"sqlite:///{tmp_path / 'target.sqlite3'}")
    target.sql(ORDERS_DDL)
    return target


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """An empty target database with the ``orders`` table: SQLite file or PostgreSQL database."""
    if request.param == "sqlite":
        yield _sqlite_target(tmp_path)
        return
    url = postgres_target_create()
    try:
        target = Target(kind="postgres", url=url)
        target.sql(ORDERS_DDL)
        yield target
    finally:
        postgres_target_drop(url)


@pytest.fixture
def sqlite_target(tmp_path: Path) -> Target:
    """An SQLite target only (stories about options and parsing, the same on every database)."""
    return _sqlite_target(tmp_path)


# The chat-tools stories of this directory drive a run with the fake model server.
from tests.planners.chat_tools.conftest import fake_model, shared_fake_model  # noqa: E402, F401
