"""Story: a command whose reader goes away (``manage.py runs | head``) ends quietly.

The reader closes the pipe before the command writes; the command exits as a process killed by
SIGPIPE would (141) with no traceback on stderr, whatever it was printing: every command's help,
and the listings and case pages that print rows here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runtime.engine import run_start
from tests.cases.kinds import receipt_conflict
from tests.engine.support import write_scripted_task
from tests.helpers.procs import MANAGE, ROOT, child_env
from tests.review.stories import approval_run

COMMANDS = sorted(p.stem for p in (ROOT / "runtime" / "management" / "commands").glob("*.py")
                  if not p.stem.startswith("_"))

pytestmark = pytest.mark.django_db(transaction=True)


# Commands that print something here (a list with no rows writes nothing, so it could not fail).
@pytest.mark.parametrize("args", [("runs",), ("help",)])
def test_it_ends_quietly_when_the_reader_closes_the_pipe(tmp_path: Path, args: tuple[str, ...]) -> None:
    run_start(spec_path=write_scripted_task(tmp_path))
    _closed_pipe(args)


def _closed_pipe(args: tuple[str, ...]) -> None:
    proc = subprocess.Popen([sys.executable, str(MANAGE), *args], env=child_env(), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command has written anything
    stderr = proc.stderr.read().decode("utf-8", "replace")
    code = proc.wait(timeout=120)

    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, (args, stderr)
    assert "Broken pipe" not in stderr, (args, stderr)  # not turned into another error either
    assert code in (0, 141), (args, code, stderr)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_ends_quietly(command: str) -> None:
    _closed_pipe((command, "--help"))


def test_the_case_and_approval_listings_end_quietly(tmp_path: Path, ratchet_keys) -> None:
    case = receipt_conflict(tmp_path / "conflict")
    approval_run(tmp_path / "approval")
    for args in [("cases", "list"), ("cases", "show", case.case_id), ("cases", "show", case.case_id, "--json"),
                 ("approvals", "list"), ("approvals", "list", "--json")]:
        _closed_pipe(args)
