"""``manage.py worker``: one Celery worker with the sweeper (beat) inside it, in this process.

The embedded default's one command: no broker server (``CELERY_BROKER_URL`` defaults to a SQLite
file under ``var/``), no separate beat. It is a thin wrapper around::

    celery -A runtime worker -B --schedule <var>/celerybeat-schedule --concurrency N --loglevel info

``--combinations ID,...`` makes it a worker of those version combinations (DESIGN.md section
8.4): it consumes their queues ``ratchet.c.<12 hex>`` (and the default queue only if one of them
is active), so it only takes runs pinned to them.

In production run ``celery -A runtime worker`` on every machine and exactly ONE
``celery -A runtime beat``: beat inside every worker would send one sweep per worker per period
(safe, since a duplicate message is a no-op, but wasted work).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from runtime.management.cli_numbers import count


def worker_argv(*, concurrency: int, loglevel: str, pool: str, beat: bool, queues: str,
                hostname: str | None, broker_url: str) -> list[str]:
    """The ``celery worker`` arguments ``manage.py worker`` runs with (a list of strings).

    Brokers without fanout exchanges (the SQLAlchemy and filesystem transports) cannot carry
    worker-to-worker gossip, mingle or remote control, so those are switched off for them.
    """
    argv = ["worker", "--loglevel", loglevel, "--concurrency", str(concurrency), "--pool", pool,
            "--queues", queues]
    if hostname:
        argv += ["--hostname", hostname]
    if beat:
        argv += ["--beat", "--schedule", str(settings.CELERY_BEAT_SCHEDULE_FILENAME)]
    if broker_url.split("://", 1)[0].startswith(("sqla+", "sqlalchemy+", "filesystem")):
        argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return argv


class Command(BaseCommand):
    help = ("Run a Celery worker with the sweeper (beat) embedded: the embedded default's one "
            "command. In production use `celery -A runtime worker` per machine and one "
            "`celery -A runtime beat`.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--concurrency", type=count(minimum=1), default=2,
                            help="worker processes (default 2)")
        parser.add_argument("--loglevel", default="info")
        parser.add_argument("--pool", default="prefork", choices=["prefork", "solo"])
        parser.add_argument("--queues", default=None,
                            help="comma-separated queues (default CELERY_TASK_DEFAULT_QUEUE)")
        parser.add_argument("--combinations", default=None,
                            help="comma-separated combination ids (or unique prefixes) this worker runs")
        parser.add_argument("--hostname", default=None, help="node name (default celery@<host>)")
        parser.add_argument("--no-beat", action="store_true",
                            help="do not embed the sweeper (another process runs `celery beat`)")

    def handle(self, *args: Any, **options: Any) -> None:
        from runtime.rollout.combinations import combination_get, combination_queue
        from runtime.workers.dispatch import project_app

        app = project_app()

        queues = options["queues"] or settings.CELERY_TASK_DEFAULT_QUEUE
        if options["combinations"]:
            wanted = [c.strip() for c in options["combinations"].split(",") if c.strip()]
            combos = [combination_get(combination_id=c) for c in wanted]
            names = [combination_queue(c.combination_id) for c in combos]
            if any(c.state == "active" for c in combos):
                names.append(settings.CELERY_TASK_DEFAULT_QUEUE)
            queues = ",".join(names)
        argv = worker_argv(
            concurrency=options["concurrency"], loglevel=options["loglevel"], pool=options["pool"],
            beat=not options["no_beat"],
            queues=queues,
            hostname=options["hostname"], broker_url=settings.CELERY_BROKER_URL,
        )
        app.worker_main(argv=argv)
