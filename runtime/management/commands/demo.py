"""``manage.py demo``: the whole system on one machine, seeded with runs in every state.

1. ``migrate``; the three dashboard roles (``review.roles.roles_sync``); demo accounts
   ``operator``, ``reviewer`` and ``admin`` (random passwords printed once, or
   ``RATCHET_DEMO_PASSWORD`` for all three).
2. Seeds runs by replaying this repository's own history (``runtime.demo.demo_seed``): completed,
   running, waiting for approval, expired approval, receipt conflict, failed. A second start
   reuses them.
3. Starts two child processes and waits: the web server (``manage.py runserver 127.0.0.1:PORT
   --insecure --noreload``: Django's development server, which serves the static files itself;
   good for this embedded demo on localhost, not for production) and ``manage.py worker`` (a
   Celery worker with the sweeper embedded, on the SQLite broker under ``var/``). Ctrl-C or
   SIGTERM stops both children, by pid.

``--seed-only`` stops after step 2 (no servers); ``--port`` picks the web port.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.roles import DemoLogin, demo_users_ensure, roles_sync
from runtime.demo import SCENARIOS, demo_seed
from runtime.errors import RatchetError

STOP_GRACE_SECONDS = 10.0
"""How long a child may take to exit after SIGTERM before it is killed."""


class _Stop(Exception):
    """Raised from the SIGTERM handler to leave the wait loop."""


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate our own children by pid (SIGTERM, then SIGKILL after the grace period)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Command(BaseCommand):
    help = (
        "Run the demo: migrate, create demo logins, seed runs in every state from this "
        "repository's history, start the web server and a Celery worker (with beat)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="web port on 127.0.0.1")
        parser.add_argument(
            "--seed-only", action="store_true", help="seed and print the logins, start no servers"
        )
        parser.add_argument(
            "--source",
            default=str(settings.BASE_DIR),
            help="git repository whose history is replayed (default: this one)",
        )
        parser.add_argument("--concurrency", type=int, default=2, help="worker processes")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        roles_sync()
        logins = demo_users_ensure(password=os.environ.get("RATCHET_DEMO_PASSWORD") or None)
        workdir = Path(settings.VAR_DIR) / "demo"
        self.stdout.write("Seeding runs from the repository's history (a few seconds)...")
        self.stdout.flush()
        try:
            seed = demo_seed(source=Path(options["source"]), workdir=workdir)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(("Seeded" if seed.created else "Already seeded; reusing") + " runs:")
        for scenario in SCENARIOS:
            self.stdout.write(
                f"  {scenario.name:<18} {seed.runs[scenario.name]}  ({scenario.description})"
            )
        if options["seed_only"]:
            self._print_logins(logins)
            return
        self._serve(port=options["port"], concurrency=options["concurrency"], logins=logins)

    def _print_logins(self, logins: list[DemoLogin]) -> None:
        self.stdout.write("Demo logins (shown once; set RATCHET_DEMO_PASSWORD to choose them):")
        for login in logins:
            shown = (
                login.password
                if login.password is not None
                else ("(unchanged from an earlier demo; set RATCHET_DEMO_PASSWORD to reset it)")
            )
            self.stdout.write(f"  {login.username:<9} {shown}")

    def _serve(self, *, port: int, concurrency: int, logins: list[DemoLogin]) -> None:
        if _port_open(port):
            raise CommandError(f"port {port} on 127.0.0.1 is in use; pick another with --port")
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        procs: list[subprocess.Popen[bytes]] = []

        def on_term(signum: int, frame: FrameType | None) -> None:
            raise _Stop()

        previous = signal.signal(signal.SIGTERM, on_term)
        try:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        manage,
                        "runserver",
                        f"127.0.0.1:{port}",
                        "--insecure",
                        "--noreload",
                    ]
                )
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, manage, "worker", "--concurrency", str(concurrency)]
                )
            )
            deadline = time.monotonic() + 30
            while not _port_open(port):
                if procs[0].poll() is not None or time.monotonic() > deadline:
                    raise CommandError("the web server did not start; see its output above")
                time.sleep(0.2)
            self.stdout.write("")
            self.stdout.write(f"Ratchet is running: http://127.0.0.1:{port}/")
            self._print_logins(logins)
            self.stdout.write("Press Ctrl-C to stop the web server and the worker.")
            self.stdout.flush()
            while all(proc.poll() is None for proc in procs):
                time.sleep(0.5)
            failed = [p.args[2] for p in procs if p.poll() is not None]
            raise CommandError(f"a demo process exited ({', '.join(map(str, failed))}); stopping")
        except (KeyboardInterrupt, _Stop):
            self.stdout.write("Stopping the web server and the worker...")
        finally:
            _stop(procs)
            signal.signal(signal.SIGTERM, previous)
