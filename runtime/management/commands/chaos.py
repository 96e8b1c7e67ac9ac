"""``manage.py chaos TASK``: any task spec under seeded external SIGKILLs (DESIGN.md section 8.2).

Prints a table (kills requested and delivered, recoveries, success rate, duplicates, median and
p95 recovery time, wall time, load average). Exit status: 0 pass; 1 a violation (a run not
completed, a final environment that differs from the uninterrupted run's, a second effect for a
key in the adapter's records, a generation rollback, a completion not bound to the final
environment version, a failed recovery); 2 a set-up error (no spec, no scratch store, an
uninterrupted run that does not complete on its own); 3 fewer kills landed than were requested.

By default the campaign runs in a scratch store of its own (``runtime.chaos.scratch``): the
command creates it, re-runs itself against it in a child process, and drops it (PostgreSQL) or
leaves it in the workdir (SQLite). ``--configured-database`` runs in the configured database.
With ``--faults ...,slow-disk`` the command first mounts a FUSE passthrough at ``WORKDIR/disk``
(``runtime.chaos.slow_disk``, a server process of its own) and runs all of that there, then
stops the server and unmounts (DESIGN.md section 8.8). With ``--faults ...,broker-restart`` the
command that runs the campaign starts a ``redis-server`` of its own on a free loopback port
(``runtime.chaos.broker``), drives every run through a Celery worker against it, and kills the
server when it is done.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.chaos.broker import BrokerServer, broker_restart_problem
from runtime.chaos.campaign import chaos_campaign
from runtime.chaos.faults import FAULT_KINDS, THROUGH_CELERY, FaultInjector
from runtime.chaos.scratch import SCRATCH_ENV, chaos_scratch_create, chaos_scratch_drop
from runtime.chaos.slow_disk import slow_disk_mount, slow_disk_mounted, slow_disk_unmount
from runtime.errors import RatchetError

EXIT_VIOLATION, EXIT_SETUP, EXIT_SHORT_OF_KILLS = 1, 2, 3


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def _fault_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if not kinds or unknown:
        raise CommandError(f"set-up error: --faults {text!r}: choose from {', '.join(FAULT_KINDS)}",
                           returncode=EXIT_SETUP)
    return kinds


def _crash_points() -> list[str]:
    import runtime.adapters.git.adapter  # noqa: F401  (modules register their points on import)
    import runtime.adapters.workspace.adapter  # noqa: F401
    import runtime.checkpoints.protocol  # noqa: F401
    import runtime.engine  # noqa: F401
    from runtime.core.crashpoints import CRASH_POINTS

    return sorted(CRASH_POINTS)


class Command(BaseCommand):
    help = ("Run a task under seeded SIGKILLs, recover with 1..N concurrent workers, check every run. "
            "Runs go to a scratch store the command creates (an SQLite file in the workdir, or a "
            "PostgreSQL database <name>_chaos_<hex> it creates and drops; needs CREATEDB), never to "
            "the configured database unless --configured-database. Exit 0 pass, 1 violation, "
            "2 set-up error, 3 fewer kills landed than requested.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("task", help="path of the task spec (its uninterrupted run must complete unattended)")
        parser.add_argument("--runs", type=int, default=10, help="runs under kills (default 10)")
        parser.add_argument("--kills", type=int, default=3, help="external SIGKILLs per run (default 3)")
        parser.add_argument("--seed", type=int, default=1, help="seeds every random choice (default 1)")
        parser.add_argument("--recoverers", type=int, default=1,
                            help="at most N recoverers race after each kill (drawn in 1..N; default 1)")
        parser.add_argument("--lease-seconds", type=float, default=3.0,
                            help="children's lease TTL in seconds; a takeover waits for it (default 3: "
                            "shorter ones expire between heartbeats on a loaded machine)")
        parser.add_argument("--crash-points", action="store_true",
                            help="also arm every named crash point, one per run (runs >= number of points)")
        parser.add_argument("--workdir", default=None, help="keep task copies, targets, logs and the "
                            "SQLite scratch store here (default: a new temporary directory)")
        parser.add_argument("--configured-database", action="store_true",
                            help="run in the configured database instead of a scratch store (the runs "
                            "then show in `runs`, `recovery_stats` and /metrics)")
        parser.add_argument("--keep-scratch", action="store_true",
                            help="do not drop the PostgreSQL scratch database afterwards")
        parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run before giving up")
        parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
        parser.add_argument("--faults", default="sigkill",
                            help="comma-separated kinds the --kills of a run take in turn: "
                            f"{', '.join(FAULT_KINDS)} (default sigkill; DESIGN.md section 8.8). "
                            "disk-full needs --workdir on a small filesystem (at most 1 GiB); slow-disk "
                            "mounts a FUSE passthrough at WORKDIR/disk (needs /dev/fuse, libfuse 3 and "
                            "mfusepy) and runs the campaign there, each fault slowing every read, write "
                            "and fsync by 20-200 ms for 0.5-3 s; broker-restart (needs redis-server) drives "
                            "the runs through a Celery worker on a Redis server the command starts on a "
                            "free loopback port, and SIGKILLs and restarts that server empty for 0.5-3 s")
        parser.add_argument("--pg-restart-command", default="",
                            help="shell command that restarts the PostgreSQL server, for the pg-restart fault")

    def handle(self, *args: Any, **options: Any) -> None:
        # Every option is checked before anything is made (a temporary workdir, a scratch store),
        # so a mistyped fault kind leaves nothing behind.
        fault_kinds = _fault_kinds(options["faults"])
        problem = broker_restart_problem() if THROUGH_CELERY & set(fault_kinds) else None
        if problem:
            raise CommandError(f"set-up error: {problem}", returncode=EXIT_SETUP)
        task = Path(options["task"]).resolve()
        if not task.is_file():
            raise CommandError(f"set-up error: no task spec at {task}", returncode=EXIT_SETUP)
        workdir = Path(options["workdir"] or tempfile.mkdtemp(prefix="ratchet-chaos-")).resolve()
        if "slow-disk" in fault_kinds and not slow_disk_mounted(workdir):
            # The whole campaign, scratch store included, then stands on the slow mount; the
            # re-run child gets the mount point as its workdir and finds it mounted.
            signal.signal(signal.SIGTERM, _terminated)
            try:
                disk = slow_disk_mount(workdir=workdir, seed=options["seed"])
            except RatchetError as exc:
                raise CommandError(f"set-up error ({type(exc).__name__}): {exc}", returncode=EXIT_SETUP) from None
            try:
                self._campaign(task=task, workdir=disk.mountpoint, fault_kinds=fault_kinds, options=options)
            finally:
                slow_disk_unmount(disk=disk)
            return
        self._campaign(task=task, workdir=workdir, fault_kinds=fault_kinds, options=options)

    def _campaign(self, *, task: Path, workdir: Path, fault_kinds: tuple[str, ...], options: dict[str, Any]) -> None:
        if not options["configured_database"]:
            self._in_scratch(task=task, workdir=workdir, options=options)
            return
        store = os.environ.get(SCRATCH_ENV) or f"configured database {settings.DATABASES['default']['NAME']}"
        signal.signal(signal.SIGTERM, _terminated)  # the drive then kills its children on the way out

        def progress(index: int, log: Any, checks: Any) -> None:
            if not options["json"]:
                missed = f", {log.missed} kills missed (retrying)" if log.missed else ""
                self.stderr.write(f"run {index}: {log.run_id} {log.phase}, {log.kills} kills{missed}, "
                                  f"{len(log.children)} children, {'ok' if checks.passed else 'VIOLATION'}")

        # The broker-restart fault's own Redis server; stopped by pid below, SIGTERM included.
        broker = BrokerServer(directory=workdir / "broker") if THROUGH_CELERY & set(fault_kinds) else None
        try:
            if broker is not None:
                broker.start()
            report = chaos_campaign(spec=task, runs=options["runs"], kills=options["kills"], seed=options["seed"],
                                    recoverers=options["recoverers"], lease_seconds=options["lease_seconds"],
                                    crash_points=_crash_points() if options["crash_points"] else None,
                                    workdir=workdir, child_timeout=options["timeout"], store=store,
                                    on_run=progress, fault_kinds=fault_kinds,
                                    injector=FaultInjector(workdir=workdir, broker=broker,
                                                           restart_command=options["pg_restart_command"]))
        except ValueError as exc:
            raise CommandError(f"set-up error: {exc}", returncode=EXIT_SETUP) from None
        except RatchetError as exc:
            raise CommandError(f"set-up error ({type(exc).__name__}): {exc}", returncode=EXIT_SETUP) from None
        finally:
            if broker is not None:
                broker.kill()
        if options["json"]:
            body = asdict(report)
            body.update(passed=report.passed, verdict=report.verdict(), short_of_kills=report.short_of_kills)
            self.stdout.write(json.dumps(body, sort_keys=True, default=str))
        else:
            self.stdout.write(report.table())
        if report.violations or report.completed != report.runs:
            raise CommandError("chaos found violations", returncode=EXIT_VIOLATION)
        if report.short_of_kills:
            raise CommandError(report.verdict().removeprefix("FAIL: "), returncode=EXIT_SHORT_OF_KILLS)

    def _in_scratch(self, *, task: Path, workdir: Path, options: dict[str, Any]) -> None:
        """Create the scratch store, re-run this command against it, drop it; pass the exit on."""
        try:
            scratch = chaos_scratch_create(workdir=workdir)
        except RatchetError as exc:
            raise CommandError(f"set-up error ({type(exc).__name__}): {exc}", returncode=EXIT_SETUP) from None
        argv = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "chaos", str(task),
                "--configured-database", "--workdir", str(workdir)]
        for name in ("runs", "kills", "seed", "recoverers", "lease_seconds", "timeout", "faults",
                     "pg_restart_command"):
            argv += [f"--{name.replace('_', '-')}", str(options[name])]
        argv += [flag for flag, on in (("--crash-points", options["crash_points"]), ("--json", options["json"])) if on]
        # SIGTERM (a CI timeout, `kill`) unwinds through the `finally` below, so the PostgreSQL
        # scratch database is dropped even then.
        signal.signal(signal.SIGTERM, _terminated)
        try:
            # The child writes straight to our stdout/stderr: progress lines appear as runs end.
            self.stdout.flush()
            returncode = subprocess.run(argv, env=scratch.env, cwd=settings.BASE_DIR, check=False).returncode
        finally:
            if not options["keep_scratch"]:
                try:
                    chaos_scratch_drop(scratch=scratch)
                except RatchetError as exc:
                    self.stderr.write(str(exc))
        if returncode != 0:
            raise CommandError(f"chaos exited with status {returncode} (store: {scratch.label})",
                               returncode=returncode if returncode > 0 else EXIT_VIOLATION)
