"""Fixtures for the step-engine stories: keys, a shared source history, task files."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.regression.sources import small_history_build
from tests.engine.support import write_replay_task, write_scripted_task
from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    """Every engine story signs checkpoints with fresh keys (children inherit them)."""
    return ratchet_keys


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small source repository (see ``small_history_build``), shared read-only per module."""
    path = tmp_path_factory.mktemp("history") / "source"
    small_history_build(path)
    return path


@pytest.fixture
def replay_task(tmp_path: Path, source: Path) -> Path:
    """A replay task of the source's last five commits into a fresh clone under ``tmp_path``."""
    return write_replay_task(tmp_path / "replay", source)


@pytest.fixture
def workspace_task(tmp_path: Path) -> Path:
    """A five-write scripted task against an empty workspace under ``tmp_path``."""
    return write_scripted_task(tmp_path / "scripted")
