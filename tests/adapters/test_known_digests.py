"""The workspace scan reuses a file's digest only while nothing about the file changed
(runtime/adapters/workspace/known_digests.py; DESIGN.md section 5.5)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from runtime.adapters.workspace import known_digests
from runtime.adapters.workspace.scan import workspace_scan
from tests.helpers.procs import wait_for


@pytest.fixture(autouse=True)
def forget():
    known_digests._KNOWN.clear()
    yield
    known_digests._KNOWN.clear()


def _settled(path: Path) -> None:
    """Wait until the file's change time lies a whole SETTLED_NS in the past (by the clock the
    kernel stamps files with), so a scan may remember its digest."""
    wait_for(lambda: os.stat(path).st_ctime_ns < time.time_ns() - known_digests.SETTLED_NS - 10_000_000,
             timeout=30, what="the file's change time to settle")


def test_a_same_size_edit_right_after_a_scan_is_seen(tmp_path: Path):
    (tmp_path / "a.txt").write_text("one\n")
    first = workspace_scan(tmp_path, skip=".ratchet")["a.txt"]["sha256"]
    (tmp_path / "a.txt").write_text("two\n")  # same size, likely the same clock tick

    assert workspace_scan(tmp_path, skip=".ratchet")["a.txt"]["sha256"] != first
    assert known_digests._KNOWN == {}  # nothing changed long enough ago to be remembered


def test_a_settled_file_is_not_read_again_until_it_changes(tmp_path: Path, monkeypatch):
    path = tmp_path / "a.txt"
    path.write_text("one\n")
    _settled(path)
    first = workspace_scan(tmp_path, skip=".ratchet")["a.txt"]["sha256"]
    assert len(known_digests._KNOWN) == 1

    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda name, *a, **k: (opened.append(str(name)), real_open(name, *a, **k))[1])
    assert workspace_scan(tmp_path, skip=".ratchet")["a.txt"]["sha256"] == first
    assert "a.txt" not in opened

    path.write_text("two\n")  # an out-of-band edit of the same size: a new change time
    changed = workspace_scan(tmp_path, skip=".ratchet")["a.txt"]
    assert changed["sha256"] != first and "a.txt" in opened

    os.chmod(path, 0o755)
    assert workspace_scan(tmp_path, skip=".ratchet")["a.txt"]["executable"] is True
