"""OpenTelemetry traces over OTLP and structured JSON logs (DESIGN.md section 8.6).

:mod:`runtime.telemetry.setup` starts the SDK, the OTLP exporter and the Django, Celery and
psycopg instrumentation when an OTLP endpoint is configured (off by default) and hands the
engine's seam (``runtime.core.tracing``) its tracer; :mod:`runtime.telemetry.logs` puts the run
id, and the trace and span ids, on every log record written in a run's context.
"""
