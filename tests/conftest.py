"""Shared test setup: personas, keyrings and factories live in ``tests/factories.py``."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark PostgreSQL-only tests to skip on SQLite; under CI they run in the PostgreSQL pass."""
    on_postgres = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
    if on_postgres:
        return
    skip = pytest.mark.skip(reason="PostgreSQL-only; runs in the PostgreSQL pass of tests/run")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)
