"""``manage.py chaos``: any task spec under seeded external SIGKILLs (DESIGN.md section 8.2).

Modules, one concept each:

* :mod:`.scratch`    the campaign's own throwaway store (SQLite file or PostgreSQL database);
* :mod:`.spec_copy`  a private copy of the task spec per run, with a fresh target of its own;
* :mod:`.drive`      drive one run in child processes, kill them from outside at moments its
  seeded ``KillSchedule`` anchors to progress, resume with 1..N concurrent recoverers (reuses
  ``runtime.replay_check.processes``);
* :mod:`.broker`     the campaign's own Redis server, which the ``broker-restart`` fault kills;
* :mod:`.celery_drive` drive one run through a Celery worker instead, for ``broker-restart``
  (DESIGN.md section 8.8);
* :mod:`.checks`     the checks after each run, read from the adapter's records and the stored rows;
* :mod:`.campaign`   the whole campaign, its retries of runs that ended before their kills, and
  its table.
"""
