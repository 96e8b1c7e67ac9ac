"""Fixtures for the docs stories: fresh signing keys for every run (children inherit them)."""

from __future__ import annotations

import pytest

from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    return ratchet_keys
