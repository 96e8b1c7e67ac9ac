"""Fixtures for the command verifier stories: every run signs with fresh keys."""

from __future__ import annotations

import pytest

from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    """Engine stories sign checkpoints; the unit tests simply do not use them."""
    return ratchet_keys
