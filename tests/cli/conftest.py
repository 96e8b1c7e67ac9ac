"""Fixtures for the command-line stories: every run signs with fresh keys (children inherit them)."""

from __future__ import annotations

import pytest

from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    return ratchet_keys
