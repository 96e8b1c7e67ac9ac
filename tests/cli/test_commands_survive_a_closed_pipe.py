"""Story: a command whose reader goes away (``manage.py runs | head``) ends quietly.

The reader closes the pipe before the command writes; the command exits as a process killed by
SIGPIPE would (141) with no traceback on stderr, whatever it was printing.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.engine import run_start
from tests.engine.support import write_scripted_task
from tests.helpers.procs import MANAGE, ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)


# Commands that print something here (a list with no rows writes nothing, so it could not fail).
@pytest.mark.parametrize("args", [("runs",), ("help",)])
def test_it_ends_quietly_when_the_reader_closes_the_pipe(tmp_path: Path, args: tuple[str, ...]) -> None:
    run_start(spec_path=write_scripted_task(tmp_path))
    proc = subprocess.Popen([sys.executable, str(MANAGE), *args], env=child_env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command has written anything
    stderr = proc.stderr.read().decode("utf-8", "replace")
    code = proc.wait(timeout=120)

    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert code in (0, 141), (code, stderr)
