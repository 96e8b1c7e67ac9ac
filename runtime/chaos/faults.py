"""Faults beyond SIGKILL that ``manage.py chaos --faults`` injects into a driven run (DESIGN.md
section 8.8).

Each is a real fault of the kind deployments see, never a stand-in inside the code under test:

* ``sigkill``: the lease holder's whole process group is SIGKILLed (the campaign's default);
* ``pg-terminate``: every PostgreSQL backend of the holder (main database and mark store) is
  ended with ``pg_terminate_backend`` (children carry their worker id as ``application_name``
  through libpq's ``PGAPPNAME``), so a transaction dies on the server mid-flight;
* ``mark-store-down``: the mark store's database refuses new connections
  (``ALTER DATABASE ... ALLOW_CONNECTIONS false``) and its backends are ended, for a drawn
  0.5-3 s outage, then it is reopened;
* ``pg-restart``: the PostgreSQL server is restarted by the operator's ``--pg-restart-command``
  (``pg_ctl ... -m immediate restart``: a crash and recovery of the server), every connection lost;
* ``disk-full``: the filesystem of the campaign's work directory (the var directory and the
  targets) is filled to the last byte for a drawn 0.5-3 s, then the filler is removed. Refused
  unless that filesystem is small (``MAX_FILL_BYTES``): it must be one the operator made for it;
* ``slow-disk``: the work directory is a FUSE passthrough the command mounted
  (``runtime.chaos.slow_disk``); for a drawn 0.5-3 s every read, write and fsync through it
  waits 20-200 ms, then it is fast again. Refused unless the work directory is that mount;
* ``broker-restart``: the campaign's own Redis broker (``runtime.chaos.broker``) is SIGKILLed,
  kept down for a drawn 0.5-3 s and started again on the same port, empty. A campaign with this
  kind drives its runs through Celery (``runtime.chaos.celery_drive``), which delivers it itself
  (as it does ``sigkill``). Refused unless ``redis-server`` is on ``PATH``.

A fault *lands* when it did something to the run (a backend ended, the server restarted, the
disk full or slow while the holder was alive, the broker killed while the run had work left);
the drive counts those per kind.
"""

from __future__ import annotations

import errno
import os
import random
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections

from runtime.chaos.broker import BrokerServer, broker_restart_problem
from runtime.chaos.slow_disk import slow_disk_mounted, slow_disk_window
from runtime.errors import ChaosSetupError

FAULT_KINDS = ("sigkill", "pg-terminate", "mark-store-down", "pg-restart", "disk-full", "slow-disk",
               "broker-restart")
POSTGRES_ONLY = frozenset({"pg-terminate", "mark-store-down", "pg-restart"})
THROUGH_CELERY = frozenset({"broker-restart"})
"""Kinds whose campaign drives its runs through a Celery worker instead of ``run``/``resume``."""
MAX_FILL_BYTES = 1 << 30
"""``disk-full`` fills only a filesystem of at most 1 GiB (a tmpfs or loop device made for it)."""
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
OUTAGE_SECONDS = (0.5, 3.0)
"""How long ``mark-store-down``, ``disk-full``, ``slow-disk`` and ``broker-restart`` last, drawn
uniformly (seconds)."""


def _postgres(alias: str) -> dict[str, Any]:
    db = settings.DATABASES.get(alias) or {}
    if "postgresql" not in str(db.get("ENGINE", "")):
        raise ChaosSetupError(f"this fault needs PostgreSQL, but the {alias!r} database is not on it")
    return db


def _admin_connection() -> Any:
    """An autocommit connection to the server's ``postgres`` database (the role owns the scratch
    databases it created, which ``ALTER DATABASE`` and ``pg_terminate_backend`` need)."""
    import psycopg

    db = _postgres("default")
    return psycopg.connect(host=db.get("HOST") or None, port=db.get("PORT") or None, user=db.get("USER") or None,
                           password=db.get("PASSWORD") or None, dbname="postgres", autocommit=True,
                           connect_timeout=30, application_name="ratchet-chaos-faults")


def _terminate(*, application_name: str | None = None, database: str | None = None) -> int:
    """End every backend with this ``application_name`` (or connected to ``database``); the count."""
    with _admin_connection() as conn:
        if application_name is not None:
            row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = %s AND pid <> pg_backend_pid()",
                               [application_name]).fetchone()
        else:
            row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> pg_backend_pid()", [database]).fetchone()
    return int(row[0]) if row else 0


@dataclass
class FaultInjector:
    """Injects one fault kind into a driven run; see the module docstring for each kind.

    Attributes:
        workdir: the campaign's work directory (``disk-full`` fills its filesystem; ``slow-disk``
            slows its FUSE mount).
        restart_command: the shell command that restarts the PostgreSQL server (``pg-restart``).
        broker: the campaign's own Redis server (``broker-restart``), started by the command.
    """

    workdir: Path
    restart_command: str = ""
    broker: BrokerServer | None = None

    def check(self, kinds: list[str]) -> None:
        """Refuse, before anything runs, faults this set-up cannot inject.

        Raises:
            ChaosSetupError: an unknown kind; a PostgreSQL fault on SQLite; ``pg-restart``
                without a restart command; ``disk-full`` on a filesystem larger than
                ``MAX_FILL_BYTES``; ``slow-disk`` on a work directory that is not the slow mount;
                ``broker-restart`` without ``redis-server`` on ``PATH`` or without the broker.
        """
        for kind in kinds:
            if kind not in FAULT_KINDS:
                raise ChaosSetupError(f"unknown fault {kind!r}: choose from {', '.join(FAULT_KINDS)}")
            if kind in POSTGRES_ONLY:
                _postgres("default")
                _postgres("hwm")
            if kind == "pg-restart" and not self.restart_command:
                raise ChaosSetupError("pg-restart needs --pg-restart-command (how to restart this server)")
            if kind == "disk-full":
                stat = os.statvfs(self.workdir)
                size = stat.f_blocks * stat.f_frsize
                if size > MAX_FILL_BYTES:
                    raise ChaosSetupError(
                        f"disk-full fills the work directory's filesystem, which holds {size} bytes; "
                        f"put --workdir on a small one made for it (at most {MAX_FILL_BYTES} bytes, "
                        "e.g. `mount -t tmpfs -o size=256m tmpfs DIR`)")
            if kind == "slow-disk" and not slow_disk_mounted(self.workdir):
                raise ChaosSetupError("slow-disk needs the work directory on the FUSE mount `manage.py chaos` "
                                      "makes for it (run the command with --faults ...,slow-disk)")
            if kind == "broker-restart":
                problem = broker_restart_problem()
                if problem:
                    raise ChaosSetupError(problem)
                if self.broker is None:
                    raise ChaosSetupError("broker-restart needs the campaign's own broker (`manage.py chaos` "
                                          "starts it)")

    def inject(self, *, kind: str, proc: subprocess.Popen[bytes], worker: str, rng: random.Random) -> bool:
        """Inject ``kind`` into the run whose lease ``worker`` (``proc``, a group leader) holds.
        ``sigkill`` and ``broker-restart`` are not injected here: the drive delivers them itself,
        with its bookkeeping of killed children and of the run's phase at the kill
        (``runtime.chaos.drive``, ``runtime.chaos.celery_drive``).

        Returns:
            Whether it landed: the group was killed, a backend ended, the store or the disk was
            out while the holder was alive, the server restarted.
        """
        try:
            return self._inject(kind=kind, proc=proc, worker=worker, rng=rng)
        finally:
            # The fault may have ended this process's own connections too (the mark store's
            # backends, a restarted server): reconnect on next use instead of failing a check.
            connections.close_all()

    def _inject(self, *, kind: str, proc: subprocess.Popen[bytes], worker: str, rng: random.Random) -> bool:
        if kind == "pg-terminate":
            return _terminate(application_name=worker) > 0
        if kind == "mark-store-down":
            return self._mark_store_down(proc=proc, seconds=rng.uniform(*OUTAGE_SECONDS))
        if kind == "pg-restart":
            # Output to a file, never a pipe: a restarted server inherits the command's streams and
            # would hold a pipe open for as long as it runs.
            log = self.workdir / "pg-restart.log"
            with log.open("ab") as out:
                done = subprocess.run(self.restart_command, shell=True, check=False, stdout=out,  # noqa: S602
                                      stderr=out, stdin=subprocess.DEVNULL, timeout=300)
            if done.returncode != 0:
                raise ChaosSetupError(f"--pg-restart-command failed (exit {done.returncode}); its output is in {log}")
            return True
        if kind == "disk-full":
            return self._disk_full(proc=proc, seconds=rng.uniform(*OUTAGE_SECONDS))
        if kind == "slow-disk":
            return slow_disk_window(workdir=self.workdir, alive=lambda: proc.poll() is None,
                                    seconds=rng.uniform(*OUTAGE_SECONDS))
        if kind in ("sigkill", "broker-restart"):
            raise ValueError(f"fault {kind!r} is delivered by the drive, not injected")
        raise ChaosSetupError(f"unknown fault {kind!r}")

    def _mark_store_down(self, *, proc: subprocess.Popen[bytes], seconds: float) -> bool:
        name = str(_postgres("hwm")["NAME"])
        quoted = '"' + name.replace('"', '""') + '"'
        with _admin_connection() as conn:
            conn.execute(f"ALTER DATABASE {quoted} WITH ALLOW_CONNECTIONS false")
            try:
                _terminate(database=name)
                landed = proc.poll() is None
                time.sleep(seconds)
            finally:
                conn.execute(f"ALTER DATABASE {quoted} WITH ALLOW_CONNECTIONS true")
        return landed

    def _disk_full(self, *, proc: subprocess.Popen[bytes], seconds: float) -> bool:
        filler = self.workdir / f".chaos-filler-{os.getpid()}"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            stat = os.statvfs(self.workdir)
            try:
                os.posix_fallocate(fd, 0, max(1, stat.f_bfree * stat.f_frsize))
            except OSError as exc:
                # ENOSPC for the last blocks (or no fallocate here): the writes below take the rest.
                if exc.errno not in _FULL_ERRNOS + (errno.EOPNOTSUPP,):
                    raise
            offset = os.fstat(fd).st_size
            for size in (65536, 4096, 512, 1):
                try:
                    while True:
                        offset += os.pwrite(fd, b"\0" * size, offset)
                except OSError as exc:
                    if exc.errno not in _FULL_ERRNOS:
                        raise
            landed = proc.poll() is None
            time.sleep(seconds)
            return landed
        finally:
            os.close(fd)
            filler.unlink(missing_ok=True)


def restart_command_describe(command: str) -> str:
    """The restart command as the table shows it (its program name only, never arguments that
    might carry a password)."""
    parts = shlex.split(command) if command else []
    return parts[0] if parts else "-"
