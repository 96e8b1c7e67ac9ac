"""Start OpenTelemetry tracing: SDK, OTLP exporter, instrumentation (DESIGN.md section 8.6).

Tracing is on when an OTLP endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``; ``RATCHET_TRACING`` in ``runtime/project/settings.py``)
and ``OTEL_SDK_DISABLED`` is not true. Off, nothing here is imported or run: no SDK, no
instrumentation middleware, no exporter thread, and the engine's seam stays inert.

On, :func:`tracing_start` builds an SDK ``TracerProvider`` with a ``BatchSpanProcessor`` and the
OTLP exporter of the configured protocol (``grpc`` or ``http/protobuf``), which reads the rest of
the standard ``OTEL_EXPORTER_OTLP_*`` variables (headers, certificates, timeout, compression)
itself, as do the batch processor (``OTEL_BSP_*``) and the resource (``OTEL_RESOURCE_ATTRIBUTES``).
It instruments Django (a server span per web request, the dashboard's and the JSON API's),
Celery (a span per task and per publish, with the trace context carried in the message) and,
with ``RATCHET_OTEL_DB_SPANS``, psycopg (a span per SQL statement), then hands the engine's
seam its tracer. It runs from the runtime app's ``ready()``: before Django builds its middleware
chain and before a Celery worker forks its pool (the batch processor restarts its export thread
in each forked child).
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

from runtime.core.tracing import tracing_activate, tracing_deactivate
from runtime.errors import TelemetrySetupError

log = logging.getLogger("runtime.telemetry")

PROTOCOLS = ("http/protobuf", "grpc")
"""The OTLP protocols the Python exporters speak (``OTEL_EXPORTER_OTLP_PROTOCOL``)."""

_started: dict[str, Any] = {}


def span_exporter(*, protocol: str) -> Any:
    """The OTLP span exporter for ``protocol`` (``"http/protobuf"`` or ``"grpc"``).

    Raises:
        TelemetrySetupError: the protocol is not one of :data:`PROTOCOLS`, or the exporter
            package (``opentelemetry-exporter-otlp``) is not installed.
    """
    if protocol not in PROTOCOLS:
        raise TelemetrySetupError(f"OTLP protocol {protocol!r} is not supported; use one of {', '.join(PROTOCOLS)}",
                                  setting="OTEL_EXPORTER_OTLP_PROTOCOL", value=protocol)
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise TelemetrySetupError(f"the OTLP exporter for {protocol} is not installed ({exc.name})",
                                  setting="OTEL_EXPORTER_OTLP_PROTOCOL", value=protocol) from None
    return OTLPSpanExporter()


def tracing_start(*, service_name: str, exporter: Any, db_spans: bool = False, set_global: bool = True,
                  simple: bool = False) -> Any:
    """Start tracing in this process and return the SDK ``TracerProvider``.

    Args:
        service_name: ``service.name`` of every span (``OTEL_SERVICE_NAME``, default ``ratchet``).
        exporter: a ``SpanExporter`` (:func:`span_exporter`, or an in-memory one in tests).
        db_spans: also instrument psycopg (one span per SQL statement).
        set_global: make the provider the process's global one (False in tests, which start and
            stop tracing more than once in one process; the global provider can be set once).
        simple: export each span as it ends (``SimpleSpanProcessor``) instead of in batches.

    Raises:
        TelemetrySetupError: the SDK or an instrumentation package is not installed.
    """
    try:
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.django import DjangoInstrumentor
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise TelemetrySetupError(f"the OpenTelemetry SDK or an instrumentation package is not installed "
                                  f"({exc.name})", setting="OTEL_EXPORTER_OTLP_ENDPOINT") from None
    tracing_stop()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    provider.add_span_processor(SimpleSpanProcessor(exporter) if simple else BatchSpanProcessor(exporter))
    if set_global:
        trace.set_tracer_provider(provider)
    instrumentors: list[Any] = [DjangoInstrumentor(), CeleryInstrumentor()]
    if db_spans:
        try:
            from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
        except ImportError as exc:
            raise TelemetrySetupError(f"RATCHET_OTEL_DB_SPANS needs opentelemetry-instrumentation-psycopg "
                                      f"({exc.name})", setting="RATCHET_OTEL_DB_SPANS") from None
        instrumentors.append(PsycopgInstrumentor())
    for instrumentor in instrumentors:
        instrumentor.instrument(tracer_provider=provider)
    tracing_activate(provider)
    _started.update(provider=provider, instrumentors=instrumentors)
    return provider


def tracing_stop() -> None:
    """Undo :func:`tracing_start` in this process: flush and shut the provider down, remove the
    instrumentation, switch the engine's seam off. Does nothing when tracing is not started."""
    if not _started:
        return
    tracing_deactivate()
    for instrumentor in _started.pop("instrumentors"):
        instrumentor.uninstrument()
    provider = _started.pop("provider")
    provider.shutdown()


def tracing_start_from_settings() -> None:
    """Start tracing as ``runtime/project/settings.py`` says (``RATCHET_TRACING`` and the
    ``RATCHET_OTEL_*`` settings); do nothing while it is off (the default).

    Raises:
        TelemetrySetupError: an endpoint is set but tracing cannot start (see :func:`span_exporter`).
    """
    from django.conf import settings

    if not settings.RATCHET_TRACING:
        return
    tracing_start(service_name=settings.RATCHET_OTEL_SERVICE_NAME,
                  exporter=span_exporter(protocol=settings.RATCHET_OTEL_PROTOCOL),
                  db_spans=settings.RATCHET_OTEL_DB_SPANS)
    log.info("OpenTelemetry tracing on: OTLP %s export as service %s", settings.RATCHET_OTEL_PROTOCOL,
             settings.RATCHET_OTEL_SERVICE_NAME)
