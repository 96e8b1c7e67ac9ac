"""``manage.py chaos``: any task spec under seeded external SIGKILLs (DESIGN.md section 8.2).

Modules, one concept each:

* :mod:`.spec_copy`  a private copy of the task spec per run, with a fresh target of its own;
* :mod:`.drive`      drive one run in child processes, kill them from outside, resume with 1..N
  concurrent recoverers (reuses ``runtime.replay_check.processes`` and its ``KillPlan``);
* :mod:`.checks`     the checks after each run, read from the adapter's records and the trace;
* :mod:`.campaign`   the whole campaign and its table.
"""
