"""Fixtures for the chaos stories: the engine stories' keys, a short and a longer scripted task."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.conftest import keys, workspace_task
from tests.engine.support import write_scripted_task

__all__ = ["keys", "long_task", "short_task", "workspace_task"]

WRITES = 24


@pytest.fixture
def long_task(tmp_path: Path) -> Path:
    """A scripted workspace task of ``WRITES`` writes (the quick mode's task)."""
    steps = [{"target": f"notes/{i:02d}.txt", "content": f"note {i}\n"} for i in range(WRITES)]
    files = {f"notes/{i:02d}.txt": f"note {i}\n" for i in range(WRITES)}
    return write_scripted_task(tmp_path / "long", steps, files=files, absent=[], budget=2 * WRITES + 10)


@pytest.fixture
def short_task(tmp_path: Path) -> Path:
    """A scripted workspace task of two writes: it finishes in a few generations, so kills drawn
    against wall time alone would often come after it finished."""
    steps = [{"target": "a.txt", "content": "a\n"}, {"target": "b.txt", "content": "b\n"}]
    return write_scripted_task(tmp_path / "short", steps, files={"a.txt": "a\n", "b.txt": "b\n"}, absent=[])
