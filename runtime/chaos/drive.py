"""Drive one run in child processes under external SIGKILLs, resumed by 1..N concurrent recoverers.

The first child is ``manage.py run TASK --json``. Optionally one named crash point is armed
(``RATCHET_CRASH_AT``) and its child kills itself there: the first recoverer arms it when
external kills are planned (so the run exists and was announced before it dies), else the first
child. Whenever no child is alive and the run has not stopped, ``k`` recoverers (``manage.py
resume RUN --wait ...``, ``k`` drawn by the seeded RNG in ``1..recoverers``) start at once and
race for the lease; the losers wait and take over when the holder dies. While kills remain, the
child holding the lease is SIGKILLed (its whole process group, ``runtime.replay_check.processes``)
at a moment the seeded :class:`KillSchedule` draws inside the run's remaining work, so the kills
land before the run finishes (DESIGN.md section 8.2).
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

from django.conf import settings
from django.db import DatabaseError, connections

from runtime.chaos.faults import FaultInjector
from runtime.models import Run
from runtime.replay_check.processes import group_kill, group_runs_git, group_start

POLL_SECONDS = 0.01
"""Seconds between two reads of the run row while a drive watches it."""
STOPPED_PHASES = frozenset({"completed", "failed", "cancelled", "needs_review", "awaiting_approval"})
"""Phases in which a driven run has stopped: nothing is left for a fault to interrupt."""
MAX_ROUNDS = 50
"""Rounds of recoverers started with neither a kill nor a committed generation in between
before the drive gives up (a child that fails the same way every time, e.g. a broken store)."""


@dataclass
class KillSchedule:
    """The seeded kill schedule of one run: kills remaining and how to draw the next moment.

    Kills are anchored to progress, not to wall time, so they land on a fast or a loaded machine
    alike: with ``k`` kills left at generation ``g`` of an uninterrupted run's ``generations``,
    the next target is drawn uniformly among the next ``(generations - 1 - g) / k`` generations
    (scaled by ``scale``), and the kill comes a uniform ``0..seconds_per_generation * scale``
    seconds after the holder reached it: any moment between two commits, restore and
    re-observation included, and before the last commit while work remains.

    Attributes:
        kills: kills still to deliver (counts down).
        generations: committed generations of the uninterrupted run (>= 1).
        seconds_per_generation: its measured pace, seconds.
        rng: seeded.
        scale: ``1.0``; a retried run halves it so its kills come sooner.
    """

    kills: int
    generations: int
    seconds_per_generation: float
    rng: random.Random
    scale: float = 1.0

    def next_kill(self, *, generation: int) -> tuple[int, float]:
        """``(target generation, seconds after reaching it)`` for the holder seen at ``generation``."""
        span = max(0, self.generations - 1 - generation) / max(1, self.kills)
        target = generation + self.rng.randint(0, max(0, int(span * self.scale) - 1))
        return target, self.rng.uniform(0.0, self.seconds_per_generation * self.scale)


@dataclass
class Child:
    """One child process: ``command`` is ``run`` or ``resume``; ``killed`` by the drive."""

    index: int
    command: str
    worker: str
    proc: Popen[bytes]
    stdout: Path
    stderr: Path
    kill_target: int | None = None
    kill_delay: float = 0.0
    kill_at: float | None = None
    killed: bool = False
    returncode: int | None = None

    def kill(self) -> bool:
        """SIGKILL this child's whole process group and reap it; False if it had already exited."""
        if not group_kill(self.proc):
            return False
        self.killed = True
        self.proc.wait()
        return True

    def verdict(self) -> dict:
        try:
            lines = self.stdout.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return {}
        for line in reversed(lines):
            if line.startswith("{"):
                try:
                    found = json.loads(line)
                except ValueError:
                    return {}
                return found if isinstance(found, dict) else {}
        return {}


@dataclass
class DriveLog:
    """What one drive did. ``kills``: delivered while work remained; ``missed``: planned kills
    that never landed because the run stopped first; ``late_kills``: SIGKILLs that hit a child
    after the run had stopped (not counted as delivered); ``progress_seconds``: per kill, seconds
    until the next generation committed (lease expiry and the takeover included)."""

    run_id: str | None = None
    children: list[Child] = field(default_factory=list)
    kills: int = 0
    missed: int = 0
    late_kills: int = 0
    crash_point_kills: int = 0
    kills_in_git: int = 0
    phase: str = "-"
    error: str = ""
    progress_seconds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0
    faults: dict[str, int] = field(default_factory=dict)
    """Delivered faults per kind (``runtime.chaos.faults``); SIGKILLs are ``sigkill``."""

    def delivered(self, *, kind: str, in_git: bool) -> None:
        """Count one fault of ``kind`` that landed while the run had work left (``in_git``: a
        SIGKILL that hit a git process of the holder)."""
        self.kills += 1
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.kills_in_git += 1 if in_git and kind == "sigkill" else 0


def _announced(stderr: Path) -> str | None:
    try:
        text = stderr.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "run":
            return parts[1]
    return None


def run_row(run_id: str | None) -> dict:
    """The run's ``phase``, ``generation`` and ``owner_worker`` (``{}``: no run, or the read failed)."""
    if run_id is None:
        return {}
    try:
        return Run.objects.filter(run_id=run_id).values("phase", "generation", "owner_worker").first() or {}
    except DatabaseError:
        # An injected fault (a server restart) broke this process's own connection too: drop it
        # and read again on the next poll.
        connections["default"].close()
        return {}


def chaos_run_drive(*, task: Path, plan: KillSchedule, recoverers: int, rng: random.Random, lease_seconds: float,
                    env: Mapping[str, str], logs: Path, tag: str, crash_at: str | None = None,
                    child_timeout: float = 600.0, fault_kinds: tuple[str, ...] = ("sigkill",),
                    injector: FaultInjector | None = None) -> DriveLog:
    """Create the run of ``task`` in a child and drive it until it stops, killing per ``plan``.

    Args:
        task: the task spec (a private copy, ``runtime.chaos.spec_copy``).
        plan: the seeded kill schedule; ``plan.kills`` counts down as kills are delivered and
            what is left when the run stops is the log's ``missed``.
        recoverers: the most recoverers started at once after a kill (>= 1).
        rng: the seeded RNG that draws how many recoverers start.
        lease_seconds: the children's ``RATCHET_LEASE_SECONDS``.
        env: the children's environment (database, keys, var dir).
        logs: directory for every child's stdout and stderr.
        tag: names the children's worker ids.
        crash_at: a crash point to arm (``RATCHET_CRASH_AT``) in the first recoverer (in the
            first child when ``plan.kills`` is 0), or None.
        child_timeout: seconds after which the drive kills everything and gives up.
        fault_kinds: what each planned kill is, taken in turn (``runtime.chaos.faults``; default:
            SIGKILL only); the moments stay seeded and random.
        injector: injects the kinds other than ``sigkill`` (required when there are any).

    Returns:
        A :class:`DriveLog`; a child's failure is its ``error``, never an exception.
    """
    logs.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in env.items() if k != "RATCHET_CRASH_AT"}
    base_env["RATCHET_LEASE_SECONDS"] = f"{lease_seconds:g}"
    log = DriveLog()
    manage = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py")]

    def start(command: str, *, armed: str | None = None) -> Child:
        index = len(log.children)
        worker = f"chaos-{tag}-{index}"
        args = ["run", str(task)] if command == "run" else ["resume", str(log.run_id), "--wait",
                                                            f"{lease_seconds * 3 + 30:g}"]
        child_env = dict(base_env)
        child_env["PGAPPNAME"] = worker  # so pg-terminate finds this child's backends
        if armed:
            child_env["RATCHET_CRASH_AT"] = armed
        out, err = logs / f"{tag}-{index:03d}.out", logs / f"{tag}-{index:03d}.err"
        proc = group_start([*manage, *args, "--json", "--no-progress", "--worker", worker], env=child_env,
                           cwd=Path(settings.BASE_DIR), stdout=out, stderr=err)
        child = Child(index=index, command=command, worker=worker, proc=proc, stdout=out, stderr=err)
        log.children.append(child)
        return child

    started = time.monotonic()
    # The crash point is armed in the first recoverer (a point inside run creation would leave a
    # run nobody announced); with no external kill to make one, in the first child.
    armed = [crash_at] if crash_at and plan.kills > 0 else []
    alive = [start("run", armed=None if armed else crash_at)]
    rounds = seen_generation = 0
    since_kill: tuple[float, int] | None = None
    try:
        while True:
            now = time.monotonic()
            for child in [c for c in alive if c.proc.poll() is not None]:
                child.returncode = child.proc.returncode
                alive.remove(child)
                if child.returncode == -9 and not child.killed:
                    log.crash_point_kills += 1
            if log.run_id is None:
                log.run_id = _announced(log.children[0].stderr)
            row = run_row(log.run_id)
            if since_kill is not None and row.get("generation", 0) > since_kill[1]:
                log.progress_seconds.append(now - since_kill[0])
                since_kill = None
            if row.get("generation", 0) > seen_generation:
                seen_generation, rounds = row.get("generation", 0), 0
            if now - started > child_timeout:
                for child in alive:
                    group_kill(child.proc)
                    child.proc.wait()
                log.error = f"the run did not stop within {child_timeout:.0f} s"
                break
            if not alive:
                if row.get("phase") in STOPPED_PHASES:
                    break
                rounds += 1
                if rounds > MAX_ROUNDS:
                    log.error = f"gave up after {MAX_ROUNDS} rounds of recoverers without progress"
                    break
                if log.run_id is None:
                    if not log.children[-1].killed:
                        log.error = log.children[-1].verdict().get("message") or "the run was never created"
                        break
                    alive.append(start("run"))
                    continue
                if armed:  # alone, so it is the one that drives the run into its crash point
                    alive.append(start("resume", armed=armed.pop()))
                    continue
                alive.extend(start("resume") for _ in range(rng.randint(1, max(1, recoverers))))
                continue
            holder = next((c for c in alive if row.get("owner_worker") == c.worker), None)
            if plan.kills > 0 and holder is not None and row.get("phase") not in STOPPED_PHASES:
                if holder.kill_target is None:
                    holder.kill_target, holder.kill_delay = plan.next_kill(generation=row.get("generation", 0))
                if holder.kill_at is None and row.get("generation", 0) >= holder.kill_target:
                    holder.kill_at = now + holder.kill_delay
                if holder.kill_at is not None and now >= holder.kill_at:
                    # In turn, so a run with as many kills as kinds meets every kind once.
                    kind = fault_kinds[log.kills % len(fault_kinds)]
                    in_git = bool(group_runs_git(holder.proc.pid))
                    if kind == "sigkill":
                        landed = holder.kill()
                    else:
                        if injector is None:
                            raise ValueError(f"fault {kind!r} needs an injector")
                        landed = injector.inject(kind=kind, proc=holder.proc, worker=holder.worker, rng=rng)
                        # The holder may live on: its next fault is drawn afresh.
                        holder.kill_target = holder.kill_at = None
                    if landed:
                        # The run stopped between the row read and the fault: it interrupted nothing
                        # that was left to do, so it does not count as delivered.
                        if run_row(log.run_id).get("phase") in STOPPED_PHASES:
                            log.late_kills += 1
                            continue
                        plan.kills -= 1
                        log.delivered(kind=kind, in_git=in_git)
                        rounds = 0
                        since_kill = (now, row.get("generation", 0))
                    continue
            time.sleep(POLL_SECONDS)
    finally:
        # Interrupted (SIGTERM, ^C) or done: no child outlives the drive.
        for child in alive:
            if group_kill(child.proc):
                child.proc.wait()
    log.missed = plan.kills
    log.phase = run_row(log.run_id).get("phase", "-")
    if log.phase != "completed" and not log.error:
        last = next((c for c in reversed(log.children) if c.returncode not in (None, -9)), None)
        log.error = (last.verdict().get("message") or last.verdict().get("stop_reason") or "") if last else ""
    log.wall_seconds = time.monotonic() - started
    return log
