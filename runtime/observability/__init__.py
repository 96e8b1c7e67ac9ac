"""Counters, recovery statistics and their Prometheus exposition (DESIGN.md section 8).

:mod:`runtime.observability.metrics` (counters kept as trace events happen),
:mod:`runtime.observability.rules` (which events count, and when a recovery succeeded),
:mod:`runtime.observability.stats` (recovery metrics from stored events),
:mod:`runtime.observability.export` (the text format), :mod:`runtime.observability.collectors`
(families other apps add, such as the notification outbox) and :mod:`runtime.observability.view`
(``GET /metrics`` behind a bearer token).
"""
