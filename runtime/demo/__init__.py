"""The demo (``manage.py demo``): runs in every state, made by replaying real history of this
repository and by model-driven agents, and the web server and worker that show them. Only that
command (and the tests) import this package.

:func:`runtime.demo.seeding.demo_seed` writes one task per scenario (TOML, under
``<workdir>/tasks``): git-history replays (:mod:`runtime.demo.scenarios`) and chat-tools runs
against the demo's fake model (:mod:`runtime.demo.agents`), and drives each run through the real
services -- ``run_start``, ``run_advance``, ``approval_grant``, a conflicting write made
straight at the adapter, and a run process SIGKILLed at a crash point and recovered
(:mod:`runtime.demo.crash`) -- so every state on the dashboard is one the runtime reached on its own,
with real checkpoints, receipts and trace. :mod:`runtime.demo.services` runs the fake model and the
orders API the agents act on, :mod:`runtime.demo.launcher` the web server and a Celery worker, all
as child processes stopped by pid; :mod:`runtime.demo.reset` deletes what the demo seeded.
"""
