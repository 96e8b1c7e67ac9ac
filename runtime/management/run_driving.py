"""Driving a run from a command and printing how it ended: what ``manage.py run`` and
``manage.py resume`` share (DESIGN.md section 7).

The run id is announced first and flushed, so a caller can resume even if the command is killed;
the verdict is one line (or one JSON object with ``--json``) and the exit code says how the run
ended (``runtime.decisions.verdicts``): 0 only when it completed, 1 for a typed runtime error.
"""

from __future__ import annotations

import errno
import json
import sys
from typing import NoReturn

from django.core.management.base import BaseCommand, CommandError
from django.db import InterfaceError, OperationalError
from tqdm import tqdm

from runtime.decisions.verdicts import RunExit, error_verdict, run_verdict
from runtime.engine import StepReport, run_advance
from runtime.errors import MainDatabaseUnavailableError, RatchetError, StorageUnavailableError


def announce(cmd: BaseCommand, *, run_id: str, as_json: bool) -> None:
    """Print ``run <id>`` at once and flush it, so a caller can resume even if we are killed.

    With ``--json`` stdout must hold only the verdict object, so the line goes to stderr.
    """
    stream = cmd.stderr if as_json else cmd.stdout
    stream.write(f"run {run_id}", style_func=lambda text: text)
    stream.flush()


def fail(cmd: BaseCommand, *, run_id: str | None, error: RatchetError, as_json: bool) -> NoReturn:
    """Report a typed runtime error and exit 1 (:attr:`RunExit.ERROR`); ``--json`` prints it as
    the one JSON object."""
    if as_json:
        cmd.stdout.write(json.dumps(error_verdict(run_id=run_id, error=error), sort_keys=True))
    prefix = f"run {run_id}: " if run_id else ""
    raise CommandError(f"{prefix}{error}", returncode=int(RunExit.ERROR)) from None


_SQLITE_DISK_FULL = "database or disk is full"
"""SQLite's message for SQLITE_FULL, which Django raises as an OperationalError."""
_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})
"""A disk that is full, over quota, failing or read-only: an outage to report, not a bug."""


def drive(cmd: BaseCommand, *, run_id: str, worker: str | None, max_steps: int | None, progress: bool,
          wait_seconds: float = 0.0, as_json: bool = False, verify_trace: bool = False) -> StepReport:
    """Drive ``run_id`` with a progress bar on stderr; a typed runtime error exits 1.

    ``verify_trace``: re-hash the whole trace and verify the whole receipts ledger after the
    restore (``resume``, a person's restart; ``run`` has just created the run and skips it).
    """
    bar = tqdm(desc="steps", unit="step", file=sys.stderr, disable=not progress, dynamic_ncols=True)

    def on_step(report: StepReport) -> None:
        bar.update(1)
        bar.set_postfix(phase=report.phase, write=report.cursor)

    try:
        return run_advance(run_id=run_id, worker=worker, max_steps=max_steps, on_step=on_step,
                           wait_seconds=wait_seconds, verify_trace=verify_trace)
    except RatchetError as exc:
        fail(cmd, run_id=run_id, error=exc, as_json=as_json)
    except (OperationalError, InterfaceError) as exc:
        if _SQLITE_DISK_FULL in str(exc).lower():
            # The embedded database lives in the var directory: a full disk, not a lost server.
            fail(cmd, run_id=run_id, as_json=as_json, error=StorageUnavailableError(
                f"a file system refused a write during a step (SQLite: {exc})"[:500], run_id=run_id,
                errno_name="SQLITE_FULL"))
        # A lost connection (a terminated backend, a restarting server) is an outage, not a bug:
        # say so in the project's own terms instead of a driver traceback.
        fail(cmd, run_id=run_id, as_json=as_json, error=MainDatabaseUnavailableError(
            f"the main database connection was lost during a step ({type(exc).__name__})", run_id=run_id))
    except OSError as exc:
        if exc.errno not in _STORAGE_ERRNOS:
            raise
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        fail(cmd, run_id=run_id, as_json=as_json, error=StorageUnavailableError(
            f"a file system refused a write during a step ({name}: {exc.strerror})", run_id=run_id,
            errno_name=name))
    finally:
        bar.close()


def print_verdict(cmd: BaseCommand, report: StepReport, *, as_json: bool = False) -> None:
    """Print the verdict (a line, or one JSON object) and exit with its code (``runtime.decisions.verdicts``).

    Exit 0 only for a completed run; any other outcome raises :class:`CommandError` carrying the
    outcome's distinct exit code.
    """
    verdict = run_verdict(report=report)
    if as_json:
        cmd.stdout.write(json.dumps(verdict.as_json(), sort_keys=True))
    else:
        cmd.stdout.write(verdict.line())
    if verdict.exit_code != RunExit.COMPLETED:
        raise CommandError(f"run {verdict.run_id} is {verdict.outcome}: {verdict.line()}",
                           returncode=verdict.exit_code)
