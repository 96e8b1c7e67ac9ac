"""Notifications: telling people that a run needs them (DESIGN.md section 6.10).

:mod:`~review.notifications.events` turns trace events (and approvals about to expire) into one
recorded event each; :mod:`~review.notifications.subscriptions` owns the endpoints people and
groups subscribe with and picks, within each owner's tenant scope, who hears of an event;
:mod:`~review.notifications.messages` renders a message with absolute links;
:mod:`~review.notifications.signing` signs webhook bodies; :mod:`~review.notifications.delivery`
makes one attempt and schedules the next; :mod:`~review.notifications.outbox` says whether
delivery is failing (Health, ``/metrics``); :mod:`~review.notifications.tasks` are the Celery
tasks and :mod:`~review.notifications.hooks` wires the listener into the runtime's trace.
"""
