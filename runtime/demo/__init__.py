"""The demo (``manage.py demo``): runs in every state, made by replaying real history of this
repository, and the web server and worker that show them. Only that command (and the tests)
import this package.

:func:`runtime.demo.seeding.demo_seed` writes one git-history replay task per scenario
(:mod:`runtime.demo.scenarios`: TOML, under ``<workdir>/tasks``) and drives each run through the
real services -- ``run_start``, ``run_advance``, ``approval_grant``, and a conflicting write made
straight at the adapter -- so every state on the dashboard is one the runtime reached on its own,
with real checkpoints, receipts and trace. :mod:`runtime.demo.launcher` then starts the web
server and a Celery worker as child processes and stops them by pid.
"""
