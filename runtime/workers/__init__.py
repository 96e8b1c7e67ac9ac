"""Driving runs in the background: Celery tasks, the sweeper, orphan recovery, dispatch (DESIGN.md section 5.7).

:mod:`runtime.workers.tasks` (the Celery tasks, carrying only ids), :mod:`runtime.workers.dispatch`
(hand a run to the queue once the caller's transaction commits), :mod:`runtime.workers.sweeper`
(find runs that need a worker and have none), :mod:`runtime.workers.orphans` (resume orphaned runs
without Celery) and :mod:`runtime.workers.run_discard` (half-created runs).
"""
