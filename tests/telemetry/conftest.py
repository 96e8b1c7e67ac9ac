"""Fixtures for the tracing stories: keys, and tracing on with an in-memory span exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime.telemetry.setup import tracing_start, tracing_stop
from tests.celery.conftest import broker, send, workers  # noqa: F401 - real Celery workers for the stories
from tests.helpers.keys import TestKey


@pytest.fixture(autouse=True)
def keys(ratchet_keys: dict[str, TestKey]) -> dict[str, TestKey]:
    return ratchet_keys


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for one test (Django, Celery and the engine), every span kept in memory as it
    ends; off again, instrumentation removed, afterwards."""
    exporter = InMemorySpanExporter()
    tracing_start(service_name="ratchet-test", exporter=exporter, set_global=False, simple=True)
    try:
        yield exporter
    finally:
        tracing_stop()
