"""Hand a run to the worker queue once the caller's transaction commits (house style 4).

Services that make a run live again (an approval, a reviewer's replan, an operator's cancel) or
create one call :func:`run_enqueue`. The message is sent by the task's registered name through
the project's Celery app, so the services need not import the task module (which imports the
engine that drives the run): ``runtime.tasks`` defines ``ratchet.advance_run``, this module only
addresses it. Messages carry only ids (DESIGN.md section 4).
"""

from __future__ import annotations

from django.db import transaction

from runtime.celery import app

ADVANCE_RUN_TASK = "ratchet.advance_run"
"""The registered name of the task that drives a run (``runtime.tasks.advance_run``)."""


def run_enqueue(*, run_id: str) -> None:
    """Queue ``run_id`` for a worker once the caller's transaction commits (house style 4).

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
        app.send_task(ADVANCE_RUN_TASK, args=(run_id,), ignore_result=True)

    transaction.on_commit(publish_advance_run, robust=True)
