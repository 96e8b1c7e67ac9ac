"""The demo's processes: the web server and a Celery worker, children of ``manage.py demo``.

The web server is ``manage.py runserver 127.0.0.1:PORT --insecure --noreload``: Django's
development server, which serves the static files itself; good for this embedded demo on
localhost, not for production. The worker is ``manage.py worker`` (a Celery worker with the
sweeper embedded, on the SQLite broker under ``var/``). Both are stopped by pid, never by name.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from django.conf import settings

from runtime.errors import DemoLaunchError

STOP_GRACE_SECONDS = 10.0
"""How long a child may take to exit after SIGTERM before it is killed."""

START_SECONDS = 30.0
"""How long the web server may take to listen on its port."""


class DemoStopped(Exception):
    """Raised from the SIGTERM handler (:func:`sigterm_stops`) to leave the wait loop."""


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`DemoStopped` (so the children are stopped as on
    Ctrl-C); the previous handler is restored on the way out."""

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise DemoStopped()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class DemoProcesses:
    """The web server on 127.0.0.1:``port`` and a worker with ``concurrency`` processes.

    :meth:`start` them, :meth:`wait` until one exits, and always :meth:`stop` them (also after a
    failed start: whatever was started is stopped).
    """

    def __init__(self, *, port: int, concurrency: int) -> None:
        self.port = port
        self.concurrency = concurrency
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        """Start the web server and the worker; return once the web server listens.

        Raises:
            DemoLaunchError: the port is already in use, or the web server exited or did not
                listen within :data:`START_SECONDS`.
        """
        if port_open(self.port):
            raise DemoLaunchError(
                f"port {self.port} on 127.0.0.1 is in use; pick another with --port"
            )
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        self.procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    manage,
                    "runserver",
                    f"127.0.0.1:{self.port}",
                    "--insecure",
                    "--noreload",
                ],
                start_new_session=True,
            )
        )
        self.procs.append(
            subprocess.Popen(
                [sys.executable, manage, "worker", "--concurrency", str(self.concurrency)],
                # Its own session: the worker's pool and embedded beat are its children, and a
                # worker still finishing a long task after the grace period is ended with them.
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + START_SECONDS
        while not port_open(self.port):
            if self.procs[0].poll() is not None or time.monotonic() > deadline:
                raise DemoLaunchError("the web server did not start; see its output above")
            time.sleep(0.2)

    def wait(self) -> list[str]:
        """Block until a child exits; return the names (``runserver``, ``worker``) of those that
        did."""
        while all(proc.poll() is None for proc in self.procs):
            time.sleep(0.5)
        return [str(p.args[2]) for p in self.procs if p.poll() is not None]

    def stop(self) -> None:
        """Terminate our own children by pid (SIGTERM, then SIGKILL after the grace period)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # The whole session this child started (its pool and beat processes), not just
                # its pid: a SIGKILLed worker's children would otherwise keep running.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    proc.kill()
                proc.wait()
