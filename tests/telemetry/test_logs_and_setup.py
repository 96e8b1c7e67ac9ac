"""Story: JSON log lines written while a run is driven carry its run id; tracing is off unless an
OTLP endpoint is configured, and a protocol the exporter cannot speak fails at start-up with a
typed error (DESIGN.md section 8.6)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from django.conf import settings
from pythonjsonlogger.json import JsonFormatter

from runtime.core import tracing
from runtime.engine import run_start
from runtime.errors import TelemetrySetupError
from runtime.telemetry.logs import RunContextFilter
from runtime.telemetry.setup import span_exporter
from runtime.workers.tasks import advance_run_once
from tests.engine.support import write_scripted_task


@pytest.mark.django_db(transaction=True)
def test_lines_logged_in_a_runs_context_carry_its_run_id(tmp_path: Path) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter("%(levelname)s %(name)s %(message)s %(run_id)s"))
    handler.addFilter(RunContextFilter())
    runtime_log = logging.getLogger("runtime")
    runtime_log.addHandler(handler)
    try:
        run_id = run_start(spec_path=write_scripted_task(tmp_path / "task", [{"target": "a.txt", "content": "1\n"}]))
        assert advance_run_once(run_id=run_id, generation=None, worker="w-1") == "completed"
        assert advance_run_once(run_id="no-such-run", generation=None, worker="w-1") == "unknown-run"
        logging.getLogger("runtime.x").warning("outside any run")
    finally:
        runtime_log.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    by_message = {line["message"]: line for line in lines}
    (done,) = [line for line in lines if line["message"].startswith(f"advance_run: run {run_id} is completed")]
    assert done["run_id"] == run_id
    assert by_message["advance_run: run no-such-run does not exist; dropping the message"]["run_id"] == "no-such-run"
    assert by_message["outside any run"]["run_id"] is None


def test_tracing_is_off_by_default() -> None:
    # The test environment sets no OTLP endpoint, as a fresh install sets none.
    assert settings.RATCHET_TRACING is False and settings.RATCHET_LOG_FORMAT == "text"
    assert not tracing.tracing_enabled()


def test_an_unknown_protocol_is_a_typed_error() -> None:
    with pytest.raises(TelemetrySetupError) as raised:
        span_exporter(protocol="http/json")
    assert raised.value.context == {"setting": "OTEL_EXPORTER_OTLP_PROTOCOL", "value": "http/json"}
    assert "grpc" in str(raised.value)
