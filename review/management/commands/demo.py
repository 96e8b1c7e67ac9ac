"""``manage.py demo``: the whole system on one machine, seeded with runs in every state.

1. ``migrate``; the three dashboard roles (``review.roles.roles_sync``); demo accounts
   ``operator``, ``reviewer`` and ``admin`` (random passwords printed once, or
   ``RATCHET_DEMO_PASSWORD`` for all three).
2. Starts the demo's own services on loopback (``runtime.demo.services``): the fake model and the
   orders API, in their own processes.
3. Seeds runs (``runtime.demo.seeding.demo_seed``): by replaying this repository's own history
   (completed, waiting for approval, expired approval, two receipt conflicts, failed) and with
   the chat-tools planner against the fake model (a slow run that keeps running for minutes,
   orders booked through the HTTP adapter waiting for approval, a SQL ledger run completed).
   A second start reuses them.
4. Starts two child processes and waits (``runtime.demo.launcher``): the web server (Django's
   development server on 127.0.0.1:PORT, serving the static files itself) and ``manage.py
   worker`` (a Celery worker with the sweeper embedded). Ctrl-C or SIGTERM stops every child,
   by pid. The printed address is ``http://localhost:PORT/``: the server listens on 127.0.0.1
   only, but WebAuthn refuses an IP address as relying-party id, so passkeys work only when the
   browser reaches the dashboard by a host name (DESIGN.md section 6.9).

``--seed-only`` stops after step 3 (no servers; the demo's services are stopped again);
``--reset`` first deletes what an earlier demo seeded (``runtime.demo.reset``: its runs and
``var/demo``, nothing else) and seeds again; ``--port`` picks the web port.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.roles import DemoLogin, demo_users_ensure, roles_sync
from runtime.demo.agents import model_script
from runtime.demo.launcher import DemoProcesses, DemoStopped, sigterm_stops
from runtime.demo.reset import demo_reset
from runtime.demo.seeding import demo_scenarios, demo_seed
from runtime.demo.services import DemoServices
from runtime.errors import DemoLaunchError, RatchetError
from runtime.management.cli_numbers import count, port


def demo_url(*, port: int) -> str:
    """The address the demo prints: ``localhost``, a host name passkeys accept (WebAuthn refuses
    IP addresses as relying-party id; DESIGN.md section 6.9). ``localhost`` is in the default
    ``ALLOWED_HOSTS`` and the passkey origin defaults to the request's own."""
    return f"http://localhost:{port}/"


class Command(BaseCommand):
    help = (
        "Run the demo: migrate, create demo logins, seed runs in every state from this "
        "repository's history, start the web server and a Celery worker (with beat)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=port, default=8000, help="web port on 127.0.0.1")
        parser.add_argument(
            "--seed-only", action="store_true", help="seed and print the logins, start no servers"
        )
        parser.add_argument(
            "--source",
            default=str(settings.BASE_DIR),
            help="git repository whose history is replayed (default: this one)",
        )
        parser.add_argument("--concurrency", type=count(minimum=1), default=2, help="worker processes")
        parser.add_argument(
            "--reset", action="store_true",
            help="delete the runs and var/demo an earlier demo seeded (nothing else), then seed again",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        roles_sync()
        logins = demo_users_ensure(password=os.environ.get("RATCHET_DEMO_PASSWORD") or None)
        workdir = Path(settings.VAR_DIR) / "demo"
        if options["reset"]:
            try:
                reset = demo_reset(workdir=workdir)
            except RatchetError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"Reset: deleted {len(reset.runs)} seeded runs and the demo's directory.")
        services = DemoServices(workdir=workdir)
        with sigterm_stops():  # a SIGTERM while seeding still stops the services below
            self._seed_and_serve(services, options=options, workdir=workdir, logins=logins)

    def _seed_and_serve(self, services: DemoServices, *, options: dict[str, Any], workdir: Path,
                        logins: list[DemoLogin]) -> None:
        try:
            services.start(script=model_script())
            os.environ.update(services.environ())  # the HTTP adapter here and in the worker reads them
            self.stdout.write("Seeding runs from the repository's history and the demo agents (a few seconds)...")
            self.stdout.flush()
            seed = demo_seed(source=Path(options["source"]), workdir=workdir, services=services)
            self.stdout.write(("Seeded" if seed.created else "Already seeded; reusing") + " runs:")
            for name, description in demo_scenarios():
                self.stdout.write(f"  {name:<18} {seed.runs[name]}  ({description})")
            if options["seed_only"]:
                self._print_logins(logins)
                return
            self._serve(port=options["port"], concurrency=options["concurrency"], logins=logins)
        except RatchetError as exc:
            raise CommandError(str(exc)) from None
        except DemoStopped:
            self.stdout.write("Stopped.")
        finally:
            services.stop()

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
        processes = DemoProcesses(port=port, concurrency=concurrency)
        with sigterm_stops():
            try:
                processes.start()
                self.stdout.write("")
                self.stdout.write(f"Ratchet is running: {demo_url(port=port)}")
                self._print_logins(logins)
                self.stdout.write("Press Ctrl-C to stop the web server, the worker and the demo's services.")
                self.stdout.flush()
                exited = processes.wait()
                raise CommandError(f"a demo process exited ({', '.join(exited)}); stopping")
            except DemoLaunchError as exc:
                raise CommandError(str(exc)) from None
            except (KeyboardInterrupt, DemoStopped):
                self.stdout.write("Stopping the web server and the worker...")
            finally:
                processes.stop()
