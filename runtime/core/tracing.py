"""The engine's OpenTelemetry seam: spans in a run's own trace, and the run in log context (DESIGN.md section 8.6).

The engine and the gateway call this module; it imports only ``opentelemetry-api`` (no SDK, no
exporter, nothing from Django), so the core stays framework-free. The SDK, the exporter and the
instrumentation of Django and Celery are set up outside the core (``runtime.telemetry``), which
hands this module a tracer with :func:`tracing_activate`.

Off (the default) every helper here returns before touching OpenTelemetry: a span helper yields
None and costs one global read, so a run without tracing pays nothing measurable.

**One trace per run.** A run's trace id and the span id of its (virtual) root are derived from the
run id (:func:`run_span_context`): SHA-256 of ``"ratchet.run\\0" + run_id``, the first 16 bytes the
trace id, the next 8 the root span id. Every process that drives the run -- the worker that was
killed and the one that recovers it, a gateway, a reviewer's approval -- parents its run spans on
that same context without reading or storing anything, so the signed checkpoint and the run row
are unchanged, and runs created before tracing was switched on get a trace as well. The span that
caused the work (a Celery task, a web request, a gateway call) is attached as a span *link*.

**Run context for logs.** :func:`run_scope` sets the run id in a context variable, which
``runtime.telemetry.logs.RunContextFilter`` adds to every log record (JSON logs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags

TRACER_NAME = "ratchet"
"""The instrumentation scope of every span Ratchet itself makes."""

RUN_ID: ContextVar[str | None] = ContextVar("ratchet_run_id", default=None)
"""The run the current code works for (None outside a run); read by the log filter."""

_tracer: trace.Tracer | None = None

AttributeValue = str | bool | int | float


def tracing_activate(tracer_provider: trace.TracerProvider) -> None:
    """Make the engine emit spans through ``tracer_provider`` (an SDK ``TracerProvider``)."""
    global _tracer
    _tracer = tracer_provider.get_tracer(TRACER_NAME)


def tracing_deactivate() -> None:
    """Stop emitting spans (tests switch tracing off again with this)."""
    global _tracer
    _tracer = None


def tracing_enabled() -> bool:
    """True when spans are emitted; callers skip building attributes otherwise."""
    return _tracer is not None


def run_span_context(run_id: str) -> SpanContext:
    """The span context of ``run_id``'s virtual root: the same in every process (DESIGN.md section 8.6).

    Args:
        run_id: the run's id (any string).

    Returns:
        A remote, sampled :class:`SpanContext` whose trace id (128 bits) and span id (64 bits)
        come from SHA-256 of ``"ratchet.run\\0" + run_id``; a zero id, which W3C Trace Context
        forbids, is replaced by 1.
    """
    digest = hashlib.sha256(b"ratchet.run\0" + run_id.encode("utf-8")).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return SpanContext(trace_id=trace_id, span_id=span_id, is_remote=True,
                       trace_flags=TraceFlags(TraceFlags.SAMPLED))


@contextmanager
def run_scope(run_id: str) -> Iterator[None]:
    """Mark the code inside as working for ``run_id`` (log records carry it)."""
    token = RUN_ID.set(run_id)
    try:
        yield
    finally:
        RUN_ID.reset(token)


def _clean(attributes: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    # OpenTelemetry drops None values with a warning; leave them out instead.
    return {k: v for k, v in (attributes or {}).items() if v is not None}


@contextmanager
def run_span(name: str, *, run_id: str, attributes: Mapping[str, Any] | None = None,
             kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span | None]:
    """A span in ``run_id``'s trace, child of the run's root, current while the block runs.

    The span that was current before (a Celery task's, a web request's, a gateway call's) is
    linked, so both traces lead to each other. An exception leaving the block is recorded and
    ends the span in error, then propagates.

    Args:
        name: the span name (``ratchet.run.advance``, ``ratchet.run.start``).
        run_id: the run; the span carries it as ``ratchet.run_id``.
        attributes: more attributes; None values are left out.
        kind: the span kind.

    Yields:
        The span, or None when tracing is off.
    """
    if _tracer is None:
        yield None
        return
    caller = trace.get_current_span().get_span_context()
    root = run_span_context(run_id)
    linked = caller.is_valid and caller.trace_id != root.trace_id
    links = [Link(caller, {"ratchet.link": "caused_by"})] if linked else []
    parent = trace.set_span_in_context(NonRecordingSpan(root))
    with _tracer.start_as_current_span(name, context=parent, kind=kind, links=links,
                                       attributes={"ratchet.run_id": run_id, **_clean(attributes)}) as span:
        yield span


@contextmanager
def span(name: str, *, attributes: Mapping[str, Any] | None = None) -> Iterator[Span | None]:
    """A child of the current span (a step inside ``ratchet.run.advance``, a gateway call inside
    its web request), current while the block runs; yields None when tracing is off."""
    if _tracer is None:
        yield None
        return
    with _tracer.start_as_current_span(name, attributes=_clean(attributes)) as current:
        yield current


def span_annotate(current: Span | None, attributes: Mapping[str, Any]) -> None:
    """Set ``attributes`` on ``current`` (a span a helper here yielded; None when tracing is off)."""
    if current is not None:
        current.set_attributes(_clean(attributes))


def recovery_span_emit(*, run_id: str, description: str, start_time_ns: int,
                       attributes: Mapping[str, Any] | None = None) -> None:
    """Emit the finished ``ratchet.recovery`` span: the step another worker did not finish.

    The span belongs to ``run_id``'s trace, is linked to the run's root (the link to the run),
    starts when this worker took the lease over (``start_time_ns``, ``time.time_ns()``) and ends
    now with status ERROR and ``description`` (DESIGN.md section 8.6): the killed worker's own
    span of that step never ended, so no exporter ever sent it; this one says where it stopped.

    Args:
        run_id: the run.
        description: what was interrupted (who held the lease, generation, phase, key).
        start_time_ns: epoch nanoseconds.
        attributes: the interrupted step's generation, phase, idempotency key, adapter, holder.
    """
    if _tracer is None:
        return
    root = run_span_context(run_id)
    parent = trace.set_span_in_context(NonRecordingSpan(root), otel_context.Context())
    recovery = _tracer.start_span("ratchet.recovery", context=parent, start_time=start_time_ns,
                                  links=[Link(root, {"ratchet.link": "run"})],
                                  attributes={"ratchet.run_id": run_id, **_clean(attributes)})
    recovery.set_status(Status(StatusCode.ERROR, description))
    recovery.end()
