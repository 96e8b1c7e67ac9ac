"""Story: a gateway call over the JSON API is a Django server span with the gateway's span inside,
and a Celery task is a task span; the run's own spans link back to each (DESIGN.md section 8.6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from runtime.core.tracing import run_span_context
from runtime.engine import run_start
from runtime.gateway.tokens import token_issue
from runtime.workers.tasks import advance_run
from tests.engine.support import write_scripted_task
from tests.gateway.support import write_external_task

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_json_api_call_is_a_request_span_with_the_gateway_call_and_a_linked_run_span(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    run_id = run_start(spec_path=write_external_task(tmp_path), worker="starter")
    token = token_issue(run_id=run_id, agent="story-agent").token
    client = Client()  # built after instrumentation: its middleware chain has the tracing middleware
    body = {"call_id": "c1", "tool": "write_file", "arguments": {"path": "notes/a.txt", "content": "hi\n"}}
    answer = client.post(f"/api/v1/runs/{run_id}/calls", data=json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")
    assert answer.status_code == 200 and answer.json()["status"] == "executed"

    finished = spans.get_finished_spans()
    (server,) = [s for s in finished if s.kind == SpanKind.SERVER]
    assert server.attributes.get("http.request.method", server.attributes.get("http.method")) == "POST"
    (call,) = [s for s in finished if s.name == "ratchet.gateway.call"]
    assert call.parent.span_id == server.context.span_id and call.context.trace_id == server.context.trace_id
    assert call.attributes["ratchet.run_id"] == run_id and call.attributes["ratchet.gateway.status"] == "executed"
    assert call.attributes["ratchet.idempotency_key"] == answer.json()["idempotency_key"]
    advances = [s for s in finished if s.name == "ratchet.run.advance"]
    assert advances and all(s.context.trace_id == run_span_context(run_id).trace_id for s in advances)
    assert all([link.context.span_id for link in s.links] == [call.context.span_id] for s in advances)
    # The token never reaches a span.
    assert not any(token in json.dumps(dict(s.attributes)) for s in finished)


def test_a_celery_task_is_a_span_and_the_run_links_to_it(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", [{"target": "a.txt", "content": "1\n"}]))
    assert advance_run.apply(args=(run_id,)).get() == "completed"

    finished = spans.get_finished_spans()
    (task,) = [s for s in finished if s.kind == SpanKind.CONSUMER]
    assert task.name == "run/ratchet.advance_run"
    (advance,) = [s for s in finished if s.name == "ratchet.run.advance"]
    assert [link.context.span_id for link in advance.links] == [task.context.span_id]
    assert advance.context.trace_id == run_span_context(run_id).trace_id != task.context.trace_id
