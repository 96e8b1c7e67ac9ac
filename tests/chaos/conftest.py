"""Fixtures for the chaos stories: the engine stories' keys and a longer scripted workspace task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.conftest import keys, workspace_task
from tests.engine.support import write_scripted_task

__all__ = ["keys", "long_task", "workspace_task"]

WRITES = 24


@pytest.fixture
def long_task(tmp_path: Path) -> Path:
    """A scripted workspace task of ``WRITES`` writes (long enough for several kills to land)."""
    steps = [{"target": f"notes/{i:02d}.txt", "content": f"note {i}\n"} for i in range(WRITES)]
    files = {f"notes/{i:02d}.txt": f"note {i}\n" for i in range(WRITES)}
    return write_scripted_task(tmp_path / "long", steps, files=files, absent=[], budget=2 * WRITES + 10)
