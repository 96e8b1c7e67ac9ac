"""Story: with ``RATCHET_OTEL_DB_SPANS`` the psycopg instrumentation adds a client span per SQL
statement on PostgreSQL, inside the engine's spans (DESIGN.md section 8.6)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from runtime.core import tracing
from runtime.models import Run
from runtime.telemetry.setup import tracing_start, tracing_stop

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def db_spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    connection.close()  # the instrumentation wraps connections opened from now on
    tracing_start(service_name="ratchet-test", exporter=exporter, db_spans=True, set_global=False, simple=True)
    try:
        yield exporter
    finally:
        tracing_stop()
        connection.close()


def test_each_statement_is_a_client_span_inside_the_run_span(db_spans: InMemorySpanExporter) -> None:
    with tracing.run_span("ratchet.run.advance", run_id="r-1"):
        assert Run.objects.filter(run_id="r-1").count() == 0
    finished = db_spans.get_finished_spans()
    (advance,) = [s for s in finished if s.name == "ratchet.run.advance"]
    statements = [s for s in finished if s.kind == SpanKind.CLIENT]
    assert statements and all(s.parent.span_id == advance.context.span_id for s in statements)
    assert any("runtime_run" in str(s.attributes.get("db.statement", s.attributes.get("db.query.text", "")))
               for s in statements)
