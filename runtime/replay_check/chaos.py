"""Drive a run in child processes and SIGKILL them from outside at seeded random moments.

The first child is ``manage.py run TASK --json``; after every kill the next is ``manage.py
resume RUN_ID --json --wait ...``, until one exits with a verdict. Each child gets its own worker
id, so the parent sees (in the run row) the moment the child holds the lease, and the kill clock
starts then: a kill during the lease wait after the previous kill would prove nothing new.

When kills remain, the delay is drawn from a seeded RNG, uniform in ``[0, window]``, where the
window is sized from the progress measured so far (seconds per committed generation) so the
remaining kills spread over the remaining run instead of all landing near its start. Until a
pace was measured, the first child is watched for its first two generations and its kill drawn
from then on, so a run faster than any guess still has its kills inside it. With
probability ``git_share`` the kill then waits (up to two seconds) until a ``git`` process is
alive in the child's group, so a fixed share of kills lands inside git. The RNG fixes the
sequence of delays and choices; timing on a real machine still varies, as real crashes do.

Children's exit codes are the verdicts of ``runtime.decisions.verdicts``: 0 ends the drive; 3-6 (failed,
cancelled, needs_review, awaiting_approval) end it as a violation; 1 because the lease was held
or lost (a heartbeat late on a loaded machine) hands over to the next child; any other error
three times in a row ends it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from runtime.decisions.verdicts import RunExit
from runtime.models import Run
from runtime.replay_check.processes import group_kill, group_runs_git, group_start

_POLL_SECONDS = 0.01
_GIT_WAIT_SECONDS = 2.0
_GIT_POLL_SECONDS = 0.0005
_FIRST_GUESS_SECONDS_PER_GENERATION = 0.15
_MAX_CONSECUTIVE_ERRORS = 3
_TAKEOVER_ERRORS = frozenset({"LeaseHeldError", "LeaseLostError", "StaleGenerationError"})
"""A child that lost (or never got) the lease stopped as designed: the next child takes over."""
_MAX_TAKEOVERS = 50
_MIN_WINDOW_SECONDS = 0.05
_PACE_SAMPLE_GENERATIONS = 2
"""Generations the first child is watched for before its kill is drawn (the pace until then is a
guess)."""


@dataclass
class ChildRecord:
    """One child process of the drive.

    Attributes:
        index: 0 for the ``run`` child, then 1, 2, ... for each ``resume``.
        command: ``"run"`` or ``"resume"``.
        worker: the worker id it ran under.
        seconds: its lifetime in seconds.
        returncode: its exit status (``-9`` when SIGKILLed).
        killed: the check killed it.
        git_at_kill: a git process was alive in its group at the kill (``None``: unknown or no kill).
        generations: committed generations it added.
        verdict: its ``--json`` object, when it printed one.
    """

    index: int
    command: str
    worker: str
    seconds: float = 0.0
    returncode: int | None = None
    killed: bool = False
    git_at_kill: bool | None = None
    generations: int = 0
    verdict: dict | None = None


@dataclass
class ChaosLog:
    """What the drive did.

    Attributes:
        run_id: the run (``None`` if creation failed).
        children: every child, in order.
        outcome: the last verdict's outcome (``"completed"``, ``"needs_review"``...), or
            ``"error"`` / ``"gave_up"``.
        error: the last child's error message when it ended in an error.
        wall_seconds: from the first child's start to the last child's exit.
        takeovers: children that stopped because the lease was held or lost (a late heartbeat
            on a loaded machine); the next child took over. Not a violation by itself.
    """

    run_id: str | None = None
    children: list[ChildRecord] = field(default_factory=list)
    outcome: str = "error"
    error: str = ""
    wall_seconds: float = 0.0
    takeovers: int = 0

    @property
    def kills(self) -> int:
        return sum(1 for c in self.children if c.killed)

    @property
    def kills_in_git(self) -> int:
        return sum(1 for c in self.children if c.killed and c.git_at_kill)


@dataclass
class KillPlan:
    """The seeded kill schedule: how many kills remain and how to draw the next moment."""

    kills: int
    seed: int
    git_share: float
    rng: random.Random = field(init=False)
    seconds_per_generation: float = _FIRST_GUESS_SECONDS_PER_GENERATION
    paced: bool = False
    """True once the pace was measured on a child (before that it is only a guess)."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next_delay(self, *, remaining_generations: int) -> float:
        """Seconds to wait, once the child holds the lease, before killing it (uniform in the
        window that spreads the remaining kills evenly over the remaining work)."""
        remaining = max(remaining_generations, 1) * self.seconds_per_generation
        window = max(_MIN_WINDOW_SECONDS, 2.0 * remaining / (self.kills + 1))
        return self.rng.uniform(0.0, window)

    def wants_git(self) -> bool:
        """Whether this kill waits for a git process in the child's group."""
        return self.rng.random() < self.git_share


def _manage_argv(*args: str) -> list[str]:
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args]


def _generation(run_id: str | None) -> int:
    if run_id is None:
        return 0
    return Run.objects.filter(run_id=run_id).values_list("generation", flat=True).first() or 0


def _holds_lease(run_id: str, worker: str) -> bool:
    return Run.objects.filter(run_id=run_id, owner_worker=worker).exists()


def _announced_run_id(stderr: Path) -> str | None:
    """The ``run <id>`` line a ``--json`` child writes to stderr once the run exists."""
    try:
        text = stderr.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("run ") and len(line.split()) == 2:
            return line.split()[1]
    return None


def _verdict(stdout: Path) -> dict | None:
    try:
        lines = stdout.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                return None
            return found if isinstance(found, dict) else None
    return None


def _wait_until(predicate: Callable[[], bool], *, proc_alive: Callable[[], bool], timeout: float,
                poll: float = _POLL_SECONDS) -> bool:
    deadline = time.monotonic() + timeout
    while proc_alive():
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return False


def _kill_when_due(proc: subprocess.Popen[bytes], *, log: ChaosLog, record: ChildRecord, err: Path,
                   plan: KillPlan, generations_hint: int, child_timeout: float) -> float | None:
    """Wait until the child holds the lease, then kill it at the plan's next moment.

    Returns the monotonic time the child started driving (``None`` if it never held the lease).
    """

    def alive() -> bool:
        return proc.poll() is None

    if log.run_id is None:
        _wait_until(lambda: _announced_run_id(err) is not None, proc_alive=alive, timeout=child_timeout)
        log.run_id = _announced_run_id(err)
    run_id = log.run_id
    if run_id is None or not _wait_until(lambda: _holds_lease(run_id, record.worker), proc_alive=alive,
                                         timeout=child_timeout):
        return None
    driving_from = time.monotonic()
    if not plan.paced:
        # No pace measured yet: a guess can be far too slow for a fast run, and every kill would
        # then land after the run ended. Watch the first generations go by, then draw the delay.
        first = _generation(run_id)
        _wait_until(lambda: _generation(run_id) - first >= _PACE_SAMPLE_GENERATIONS, proc_alive=alive,
                    timeout=child_timeout)
        if (advanced := _generation(run_id) - first) > 0:
            plan.seconds_per_generation = (time.monotonic() - driving_from) / advanced
            plan.paced = True
    counted_from = time.monotonic()
    delay = plan.next_delay(remaining_generations=generations_hint - _generation(run_id))
    wants_git = plan.wants_git()
    _wait_until(lambda: time.monotonic() - counted_from >= delay, proc_alive=alive, timeout=delay + 1.0)
    if wants_git:
        # A git call of the adapter lasts milliseconds: look for one far more often than usual.
        _wait_until(lambda: bool(group_runs_git(proc.pid)), proc_alive=alive, timeout=_GIT_WAIT_SECONDS,
                    poll=_GIT_POLL_SECONDS)
    in_git = group_runs_git(proc.pid)
    if group_kill(proc):
        record.killed, record.git_at_kill = True, in_git
        plan.kills -= 1
    return driving_from


def chaos_drive(*, task: Path, generations_hint: int, plan: KillPlan, lease_seconds: float,
                env: Mapping[str, str], logs: Path, child_timeout: float = 3600.0,
                on_child: Callable[[ChildRecord], None] | None = None) -> ChaosLog:
    """Create the run of ``task`` in a child and drive it to a verdict, killing children per ``plan``.

    Args:
        task: the replay task spec file.
        generations_hint: about how many generations the whole run commits (2 per write + a few),
            used to size the kill windows before any progress is measured.
        plan: the seeded kill schedule; its ``kills`` counts down as kills are delivered.
        lease_seconds: ``RATCHET_LEASE_SECONDS`` for the children (short, so a takeover after a
            kill waits seconds, not the default 30).
        env: the children's environment (database, keys, var dir); crash points are never armed.
        logs: directory for each child's stdout and stderr.
        child_timeout: a child alive this long (seconds) is killed and counted as an error.
        on_child: called after every child (progress output).

    Returns:
        A :class:`ChaosLog`. Never raises for a child's failure: that is the log's outcome.
    """
    logs.mkdir(parents=True, exist_ok=True)
    child_env = {k: v for k, v in env.items() if k != "RATCHET_CRASH_AT"}
    child_env["RATCHET_LEASE_SECONDS"] = f"{lease_seconds:g}"
    log = ChaosLog()
    started = time.monotonic()
    errors_in_a_row = 0
    worked_seconds, worked_generations = 0.0, 0
    while True:
        index = len(log.children)
        record = ChildRecord(index=index, command="run" if log.run_id is None else "resume",
                             worker=f"replay-check-{os.getpid()}-{index}")
        args = (["run", str(task)] if log.run_id is None
                else ["resume", log.run_id, "--wait", f"{lease_seconds + 30:g}"])
        out, err = logs / f"child-{index:04d}.out", logs / f"child-{index:04d}.err"
        before = _generation(log.run_id)
        t0 = time.monotonic()
        proc = group_start(_manage_argv(*args, "--json", "--no-progress", "--worker", record.worker),
                           env=child_env, cwd=Path(settings.BASE_DIR), stdout=out, stderr=err)
        driving_from = None
        if plan.kills > 0:
            driving_from = _kill_when_due(proc, log=log, record=record, err=err, plan=plan,
                                          generations_hint=generations_hint, child_timeout=child_timeout)
        try:
            proc.wait(timeout=child_timeout)
        except subprocess.TimeoutExpired:
            group_kill(proc)
            proc.wait()
            log.error = f"child {index} ran longer than {child_timeout:.0f} s"
        record.seconds = time.monotonic() - t0
        record.returncode = proc.returncode
        record.verdict = _verdict(out)
        if log.run_id is None:
            log.run_id = _announced_run_id(err) or (record.verdict or {}).get("run_id")
        record.generations = _generation(log.run_id) - before
        if record.generations > 0:
            # Seconds per generation so far: sizes the next kill windows to the real pace.
            worked_seconds += time.monotonic() - (driving_from or t0)
            worked_generations += record.generations
            plan.seconds_per_generation = worked_seconds / worked_generations
            plan.paced = True
        log.children.append(record)
        if on_child is not None:
            on_child(record)
        done, errors_in_a_row = _judge(log, record, errors_in_a_row)
        if done:
            break
    log.wall_seconds = time.monotonic() - started
    return log


def _judge(log: ChaosLog, record: ChildRecord, errors_in_a_row: int) -> tuple[bool, int]:
    """Whether the drive ends after ``record``, and the new count of errors in a row."""
    code = record.returncode
    verdict = record.verdict or {}
    if record.killed or code == -signal.SIGKILL:
        if not record.killed:
            log.error = f"child {record.index} was SIGKILLed by someone else"
        return log.run_id is None, 0  # no run yet: creation died, nothing to resume
    if code in {int(c) for c in RunExit} - {int(RunExit.ERROR), int(RunExit.USAGE)}:
        log.outcome = RunExit(code).name.lower()
        log.error = "" if code == RunExit.COMPLETED else f"the run ended {log.outcome}: {verdict.get('stop_reason')}"
        return True, 0
    log.error = str(verdict.get("message") or f"child {record.index} exited with {code}")
    if log.run_id is None:
        return True, 0  # the run was never created: nothing to resume
    if verdict.get("retryable") or verdict.get("error") in _TAKEOVER_ERRORS:
        log.takeovers += 1
        return log.takeovers > _MAX_TAKEOVERS, 0
    errors_in_a_row += 1
    if errors_in_a_row >= _MAX_CONSECUTIVE_ERRORS:
        log.outcome = "gave_up"
        return True, errors_in_a_row
    return False, errors_in_a_row
