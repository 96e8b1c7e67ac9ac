"""Shared test setup: personas, keyrings and factories live in ``tests/factories.py``."""

from __future__ import annotations

import os

import pytest
from django.test import TransactionTestCase

from runtime.core.signing import TrustRoot
from tests.helpers.keys import TestKey, make_test_key
from tests.helpers.table_emptying import tables_empty

_DB_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
                "live_server"}


def _every_database(items: list[pytest.Item]) -> None:
    """A test that uses the database may use the high-water mark store too: it is its own
    database (the ``hwm`` alias, DESIGN.md section 4.2), which pytest-django would otherwise
    neither create nor let the test touch. Keeps the test's own ``django_db`` arguments."""
    for item in items:
        marker = item.get_closest_marker("django_db")
        if marker is None and not _DB_FIXTURES & set(getattr(item, "fixturenames", ())):
            continue
        kwargs = dict(marker.kwargs) if marker else {}
        if "databases" in kwargs or (marker and len(marker.args) > 1):
            continue  # the test names its databases itself
        kwargs["databases"] = "__all__"
        item.add_marker(pytest.mark.django_db(*(marker.args if marker else ()), **kwargs), append=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Let database tests reach every database; mark PostgreSQL-only tests to skip on SQLite
    (under CI they run in the PostgreSQL pass)."""
    _every_database(items)
    on_postgres = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
    if on_postgres:
        return
    skip = pytest.mark.skip(reason="PostgreSQL-only; runs in the PostgreSQL pass of tests/run")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _transactional_tests_empty_their_tables():
    """A transactional test ends by deleting its rows (``tests/helpers/table_emptying.py``)
    instead of Django's flush, which truncates and re-creates permissions at ~0.3 s a test."""
    flush = TransactionTestCase._fixture_teardown

    def teardown(self: TransactionTestCase) -> None:
        if self.serialized_rollback or self.available_apps is not None:
            flush(self)
            return
        tables_empty(aliases=list(self._databases_names(include_mirrors=False)))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TransactionTestCase, "_fixture_teardown", teardown)
        yield


@pytest.fixture
def ratchet_keys(monkeypatch: pytest.MonkeyPatch) -> dict[str, TestKey]:
    """Fresh keys for every trust root, for this process and its children; returns
    ``root name -> TestKey``. Signers get the private keys (``RATCHET_<ROOT>_KEYS``); verifiers
    of the asymmetric roots get the public keys (``RATCHET_<ROOT>_PUBLIC_KEYS``), which they use
    exclusively once set (DESIGN.md section 4.1)."""
    keys = {}
    for root in TrustRoot:
        key = make_test_key(root, f"{root.value}-test-1")
        monkeypatch.setenv(f"RATCHET_{root.value.upper()}_KEYS", key.spec)
        if root.asymmetric:
            monkeypatch.setenv(f"RATCHET_{root.value.upper()}_PUBLIC_KEYS", key.public_spec)
        keys[root.value] = key
    return keys


@pytest.fixture(autouse=True)
def _gateway_sessions_dropped():
    """No test inherits another's warm gateway sessions (``runtime.gateway.sessions``): they are
    forgotten when a test ends, without touching its database, which goes with the test."""
    yield
    from runtime.gateway.sessions import sessions_drop_all

    sessions_drop_all()
