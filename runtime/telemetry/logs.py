"""Log records that say which run they belong to (DESIGN.md section 8.6).

``RATCHET_LOG_FORMAT=json`` (``runtime/project/settings.py``) formats the runtime's log lines
with python-json-logger and adds :class:`RunContextFilter` to the console handler, so a line
logged while a run is driven carries ``run_id`` (set by ``runtime.core.tracing.run_scope`` in
the engine, the worker task and the gateway), and ``trace_id`` / ``span_id`` while a span is
current: a log search and a trace search find each other.
"""

from __future__ import annotations

import logging

from opentelemetry import trace

from runtime.core.tracing import RUN_ID


class RunContextFilter(logging.Filter):
    """Adds ``run_id`` (or None), and ``trace_id`` / ``span_id`` (32 and 16 hex digits) when a
    recording span is current, to every record it sees; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate ``record`` in place; always True."""
        if getattr(record, "run_id", None) is None:
            record.run_id = RUN_ID.get()
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True
