"""Hand a run to the worker queue once the caller's transaction commits (STYLE.md rule 4).

Services that make a run live again (an approval, a reviewer's replan, an operator's cancel) or
create one call :func:`run_enqueue`. The message is sent by the task's registered name through
the project's Celery app (:func:`project_app`), so the services need not import the task module (which imports the
engine that drives the run): ``runtime.workers.tasks`` defines ``ratchet.advance_run``, this module only
addresses it. Messages carry only ids (DESIGN.md section 4).

Routing by combination (DESIGN.md section 8.4): a run pinned to an ``active`` combination, or to
none, goes to the default queue (the fleet's workers); a run pinned to any other combination
(canary, retired, rolled back) goes to that combination's own queue ``ratchet.c.<12 hex>``,
consumed only by workers started with ``manage.py worker --combinations ID``.
"""

from __future__ import annotations

from celery import Celery, current_app
from django.conf import settings
from django.db import transaction

from runtime.errors import ConfigurationError
from runtime.rollout.combinations import combination_of_run, combination_queue

ADVANCE_RUN_TASK = "ratchet.advance_run"
PROJECT_APP_NAME = "runtime"
"""The ``main`` name of the project's Celery app (``runtime.project.celery``)."""


def project_app() -> Celery:
    """The project's Celery app, as the current app of this process.

    The runtime app never imports the project package (the project wires the apps together, not
    the other way round); ``runtime.project`` makes its app current when it is imported, which
    every process configured with the project's settings does. A process whose current app is
    another one (Celery's unconfigured default would publish to a broker nobody set) fails here.

    Raises:
        ConfigurationError: the current Celery app is not the project's.
    """
    app = current_app._get_current_object()
    if app.main != PROJECT_APP_NAME:
        raise ConfigurationError(
            f"the current Celery app is {app.main!r}, not the project's {PROJECT_APP_NAME!r}: load "
            "the settings module runtime.project.settings (or one that imports it) before queueing runs")
    return app
"""The registered name of the task that drives a run (``runtime.workers.tasks.advance_run``)."""


def run_enqueue(*, run_id: str) -> None:
    """Queue ``run_id`` for a worker once the caller's transaction commits (STYLE.md rule 4).

    For services that make a run live again (an approval, a reviewer's replan) or create one:
    call it inside the transaction that changed the run, so no worker can see the message
    before the change; a rolled-back transaction publishes nothing. Outside a transaction it
    publishes at once. The message expects no particular generation, so it is never dropped as
    outdated; a duplicate of it is still harmless (the lease, then the generation check of the
    next hop).

    A broker outage at commit time does not undo or fail the caller's committed change: it is
    logged (Django's ``django.db.backends.base`` logger) and the sweeper picks the run up as
    idle within ``RATCHET_SWEEP_SECONDS``. Raises nothing itself.
    """

    def publish_advance_run() -> None:
        project_app().send_task(ADVANCE_RUN_TASK, args=(run_id,), ignore_result=True, **run_route(run_id=run_id))

    transaction.on_commit(publish_advance_run, robust=True)


def run_queue(*, run_id: str) -> str:
    """The Celery queue for ``run_id``'s messages (DESIGN.md section 8.4): the default queue for
    runs of an active combination (or of none), else the combination's own queue."""
    combination = combination_of_run(run_id=run_id)
    if combination is None or combination.state == "active":
        return settings.CELERY_TASK_DEFAULT_QUEUE
    return combination_queue(combination.combination_id)


def run_route(*, run_id: str) -> dict[str, str]:
    """Celery publish options for ``run_id``'s messages: ``{}`` for the default queue (the task's
    own routing applies), else ``{"queue": "ratchet.c.<12 hex>"}`` (DESIGN.md section 8.4)."""
    queue = run_queue(run_id=run_id)
    return {} if queue == settings.CELERY_TASK_DEFAULT_QUEUE else {"queue": queue}
