"""The chaos campaign's own Redis broker, for the ``broker-restart`` fault (DESIGN.md section 8.8).

``manage.py chaos --faults ...,broker-restart`` drives its runs through Celery
(``runtime.chaos.celery_drive``) against a ``redis-server`` it starts for itself on a free
loopback port, never a shared Redis: the fault SIGKILLs that server, keeps it down for a while
and starts it again on the same port. It runs with no persistence at all (``--save ""``,
``--appendonly no``), so a restarted server comes back empty, every queued message and every
unacknowledged delivery lost, as after a broker crash that lost its disk or a fail-over to an
empty replica.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from runtime.errors import ChaosSetupError

REDIS_SERVER = "redis-server"
"""The program the fault starts and kills (found on ``PATH``)."""
_START_SECONDS = 60.0
"""How long a started server may take to answer a PING before it is a set-up error."""


def broker_restart_problem() -> str | None:
    """Why the ``broker-restart`` fault cannot run here (``redis-server`` not on ``PATH``), or None."""
    if shutil.which(REDIS_SERVER) is None:
        return (f"broker-restart starts a broker of its own, but {REDIS_SERVER} is not on PATH "
                "(install Debian's redis-server)")
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class BrokerServer:
    """A ``redis-server`` of the campaign's own on ``127.0.0.1:port``, in a session of its own.

    Attributes:
        directory: its working directory (``--dir``) and where ``redis.log`` goes.
        port: the loopback TCP port, the same across restarts.
        proc: the running server, or None while it is down.
        restarts: how many times it was started (the first start included).
    """

    directory: Path
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        """The ``CELERY_BROKER_URL`` of its database 0."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers a PING.

        Raises:
            ChaosSetupError: ``redis-server`` is missing, exited, or did not answer within
                ``_START_SECONDS`` (its log names why; a port taken in between, for instance).
        """
        problem = broker_restart_problem()
        if problem:
            raise ChaosSetupError(problem)
        self.directory.mkdir(parents=True, exist_ok=True)
        log = self.directory / "redis.log"
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--dir", str(self.directory), "--daemonize", "no"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.restarts += 1
        deadline = time.monotonic() + _START_SECONDS
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
                raise ChaosSetupError(f"the campaign's broker did not start on port {self.port}: "
                                      f"{tail[0] if tail else 'no output'}", log=str(log))
            time.sleep(0.02)

    def answers(self) -> bool:
        """Whether the server answers a PING now."""
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=1)
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def flush(self) -> None:
        """Empty database 0 (what an earlier run's worker left queued): the campaign's own server."""
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=5)
        try:
            client.flushdb()
        finally:
            client.close()

    def kill(self) -> bool:
        """SIGKILL the server (by its pid) and reap it; False if it was not running."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return False
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        proc.wait(timeout=30)
        return True
