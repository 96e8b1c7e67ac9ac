"""Shared test setup: personas, keyrings and factories live in ``tests/factories.py``."""

from __future__ import annotations

import os

import pytest

from runtime.core.signing import TrustRoot
from tests.helpers.keys import TestKey, make_test_key


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark PostgreSQL-only tests to skip on SQLite; under CI they run in the PostgreSQL pass."""
    on_postgres = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
    if on_postgres:
        return
    skip = pytest.mark.skip(reason="PostgreSQL-only; runs in the PostgreSQL pass of tests/run")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


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
