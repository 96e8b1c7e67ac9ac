"""Fixtures for the replay acceptance stories: keys, and the generated case repository."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    """Every replay signs with fresh keys; the children inherit them from the environment."""
    return ratchet_keys


@pytest.fixture(scope="module")
def case_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated repository holding the cases a replay must handle, built by the test.

    The full case repository (``tests.helpers.git_cases``: empty commits and merges, CRLF
    messages, symlinks, gitlinks, octopus merges...) is used when it is there; otherwise the
    planner tests' history (adds, edits, deletes, modes, binary, non-ASCII names, a file turned
    into a directory, a merge, several authors and UTC offsets).
    """
    path = tmp_path_factory.mktemp("cases") / "source"
    if importlib.util.find_spec("tests.helpers.git_cases") is not None:
        from tests.helpers.git_cases import build_case_repo

        return build_case_repo(path)
    from tests.planners.gitrepo import build_history

    return build_history(path).path
