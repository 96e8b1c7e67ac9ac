"""Drive one run in child processes under external SIGKILLs, resumed by 1..N concurrent recoverers.

The first child is ``manage.py run TASK --json``. Optionally one named crash point is armed
(``RATCHET_CRASH_AT``) and its child kills itself there: the first recoverer arms it when
external kills are planned (so the run exists and was announced before it dies), else the first
child. Whenever no child is alive and the run has not stopped, ``k`` recoverers (``manage.py resume RUN --wait ...``, ``k`` drawn by the seeded RNG in
``1..recoverers``) start at once and race for the lease; the losers wait and take over when the
holder dies. While kills remain, the child holding the lease is SIGKILLed (its whole process
group, ``runtime.replay_check.processes``) at a moment the seeded ``KillPlan`` of
``runtime.replay_check.chaos`` draws, counted from when it took the lease (DESIGN.md section 8.2).
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

from runtime.models import Run
from runtime.replay_check.chaos import KillPlan
from runtime.replay_check.processes import group_kill, group_runs_git, group_start

_POLL_SECONDS = 0.01
_STOPPED = frozenset({"completed", "failed", "cancelled", "needs_review", "awaiting_approval"})
_MAX_ROUNDS = 200
"""Rounds of recoverers started without a kill in between before the drive gives up."""


@dataclass
class Child:
    """One child process: ``command`` is ``run`` or ``resume``; ``killed`` by the drive."""

    index: int
    command: str
    worker: str
    proc: Popen[bytes]
    stdout: Path
    stderr: Path
    kill_at: float | None = None
    killed: bool = False
    returncode: int | None = None

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
    """What one drive did. ``progress_seconds``: per kill, seconds until the next generation
    committed (lease expiry and the takeover included)."""

    run_id: str | None = None
    children: list[Child] = field(default_factory=list)
    kills: int = 0
    crash_point_kills: int = 0
    kills_in_git: int = 0
    phase: str = "-"
    error: str = ""
    progress_seconds: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0


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


def _row(run_id: str | None) -> dict:
    if run_id is None:
        return {}
    return Run.objects.filter(run_id=run_id).values("phase", "generation", "owner_worker").first() or {}


def chaos_run_drive(*, task: Path, plan: KillPlan, recoverers: int, rng: random.Random, lease_seconds: float,
                    env: Mapping[str, str], logs: Path, tag: str, crash_at: str | None = None,
                    generations_hint: int = 20, child_timeout: float = 600.0) -> DriveLog:
    """Create the run of ``task`` in a child and drive it until it stops, killing per ``plan``.

    Args:
        task: the task spec (a private copy, ``runtime.chaos.spec_copy``).
        plan: the seeded kill schedule; ``plan.kills`` counts down as kills are delivered.
        recoverers: the most recoverers started at once after a kill (>= 1).
        rng: the seeded RNG that draws how many recoverers start.
        lease_seconds: the children's ``RATCHET_LEASE_SECONDS``.
        env: the children's environment (database, keys, var dir).
        logs: directory for every child's stdout and stderr.
        tag: names the children's worker ids.
        crash_at: a crash point to arm (``RATCHET_CRASH_AT``) in the first recoverer (in the
            first child when ``plan.kills`` is 0), or None.
        generations_hint: about how many generations the run commits (sizes the kill windows).
        child_timeout: seconds after which the drive kills everything and gives up.

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
    rounds = 0
    since_kill: tuple[float, int] | None = None
    while True:
        now = time.monotonic()
        for child in [c for c in alive if c.proc.poll() is not None]:
            child.returncode = child.proc.returncode
            alive.remove(child)
            if child.returncode == -9 and not child.killed:
                log.crash_point_kills += 1
        if log.run_id is None:
            log.run_id = _announced(log.children[0].stderr)
        row = _row(log.run_id)
        if since_kill is not None and row.get("generation", 0) > since_kill[1]:
            log.progress_seconds.append(now - since_kill[0])
            since_kill = None
        if now - started > child_timeout:
            for child in alive:
                group_kill(child.proc)
                child.proc.wait()
            log.error = f"the run did not stop within {child_timeout:.0f} s"
            break
        if not alive:
            if row.get("phase") in _STOPPED:
                break
            rounds += 1
            if rounds > _MAX_ROUNDS:
                log.error = f"gave up after {_MAX_ROUNDS} rounds of recoverers without progress"
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
        if plan.kills > 0 and holder is not None:
            if holder.kill_at is None:
                rounds = 0
                done = row.get("generation", 0)
                holder.kill_at = now + plan.next_delay(remaining_generations=generations_hint - done)
            if now >= holder.kill_at:
                in_git = bool(group_runs_git(holder.proc.pid))
                if group_kill(holder.proc):
                    holder.killed = True
                    plan.kills -= 1
                    log.kills += 1
                    log.kills_in_git += 1 if in_git else 0
                    since_kill = (now, row.get("generation", 0))
                    holder.proc.wait()
                continue
        time.sleep(_POLL_SECONDS)
    log.phase = _row(log.run_id).get("phase", "-")
    if log.phase != "completed" and not log.error:
        last = next((c for c in reversed(log.children) if c.returncode not in (None, -9)), None)
        log.error = (last.verdict().get("message") or last.verdict().get("stop_reason") or "") if last else ""
    log.wall_seconds = time.monotonic() - started
    return log
