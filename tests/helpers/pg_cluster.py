"""A PostgreSQL server of a test's own: ``initdb`` into a temporary directory, started on a free
loopback port, so a test may restart or stop it without touching the shared server.

The server runs as the ``postgres`` system user (PostgreSQL refuses root); when the tests run as
root the commands go through ``runuser``. Programs come from ``pg_config --bindir``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.gateway.support import free_port


@dataclass(frozen=True)
class PgCluster:
    """One started server: its data directory, port and the command that restarts it."""

    data: Path
    port: int
    bindir: Path

    def url(self, database: str) -> str:
        """``postgres://postgres@127.0.0.1:PORT/database`` (trust authentication)."""
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def ctl(self, *args: str) -> list[str]:
        """argv of ``pg_ctl -D DATA ARGS`` as the server's owner."""
        argv = [str(self.bindir / "pg_ctl"), "-D", str(self.data), *args]
        return _as_owner(argv)

    @property
    def restart_command(self) -> str:
        """A shell command that crashes and restarts the server (``-m immediate``: no shutdown
        checkpoint, the server recovers from its WAL), waiting until it accepts connections."""
        return shlex.join(self.ctl("-m", "immediate", "-l", str(self.data.parent / "server.log"), "-w", "-t", "120",
                                   "restart"))


def _as_owner(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def pg_cluster_problem() -> str | None:
    """Why this machine cannot start a server of the test's own, or None."""
    if shutil.which("pg_config") is None:
        return "pg_config is not on PATH (PostgreSQL's server programs are needed)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser"
    return None


def pg_cluster_start() -> PgCluster:
    """``initdb`` a cluster in a new temporary directory and start it on a free loopback port
    (trust auth, unix socket in its own directory, fsync on as in production).

    The directory is made directly in the system's temporary directory, not under pytest's
    (whose parents are private to the test user, which the server's owner cannot enter)."""
    bindir = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip())
    directory = Path(tempfile.mkdtemp(prefix="ratchet-pg-"))
    data = directory / "data"
    if os.geteuid() == 0:
        shutil.chown(directory, user="postgres")
    subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                              "--no-instructions"]), check=True, capture_output=True, timeout=300)
    port = free_port()
    cluster = PgCluster(data=data, port=port, bindir=bindir)
    options = f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
    subprocess.run(cluster.ctl("-o", options, "-l", str(directory / "server.log"), "-w", "-t", "120", "start"),
                   check=True, capture_output=True, timeout=300)
    return cluster


def pg_cluster_stop(cluster: PgCluster) -> None:
    """Stop the server fast (our own; nothing else uses it) and remove its directory."""
    subprocess.run(cluster.ctl("-m", "immediate", "-w", "stop"), check=False, capture_output=True, timeout=300)
    shutil.rmtree(cluster.data.parent, ignore_errors=True)
