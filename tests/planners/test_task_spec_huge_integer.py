"""Story: a task spec holds an integer longer than Python converts (N10).

Python refuses to turn an integer literal of more than 4,300 digits into an int, and ``tomllib``
lets that ``ValueError`` through; the loader answers it as a ``TaskSpecError`` naming the file,
and ``manage.py run`` exits with its typed message instead of a traceback.
"""

from __future__ import annotations

import pytest

from runtime.errors import TaskSpecError
from runtime.taskspec import load_task_spec
from tests.helpers.procs import child_env, run_manage


@pytest.fixture
def huge(tmp_path):
    path = tmp_path / "huge.toml"
    path.write_text("[task]\nid = \"t\"\nversion = " + "9" * 5000 + "\n", encoding="utf-8")
    return path


def test_n10_it_refuses_an_integer_toml_cannot_convert_as_a_task_spec_error(huge) -> None:
    with pytest.raises(TaskSpecError, match="huge.toml"):
        load_task_spec(huge)


def test_run_answers_it_without_a_traceback(huge) -> None:
    done = run_manage("run", str(huge), "--no-progress", env=child_env())

    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "huge.toml" in done.stderr
