"""Story: an operator opens the page of a run whose test command failed, or timed out.

Rendered with the Django test client, no browser (DESIGN.md sections 6.5 and 6.6): the page
says the phase and the stop reason, shows the failed verdict with its environment version, and
links the command's output attachment, which the operator can download.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from runtime.engine import run_advance, run_start
from tests.engine.support import trace_events
from tests.verifiers.support import CHECK_ANSWER, python, write_command_task

pytestmark = pytest.mark.django_db(transaction=True)


def _page(client_for, run_id: str) -> str:  # type: ignore[no-untyped-def]
    response = client_for("operator").get(reverse("review:run", args=[run_id]))
    assert response.status_code == 200
    return response.content.decode()


def test_it_shows_the_stop_reason_and_links_the_failed_output(client_for, tmp_path, ratchet_keys) -> None:  # type: ignore[no-untyped-def]
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(CHECK_ANSWER), content="41\n"),
                       worker="w")
    run_advance(run_id=run_id, worker="w")
    [event] = trace_events(run_id, "verifier.failed")
    digest = event["output_digest"]

    page = _page(client_for, run_id)

    assert 'class="badge phase-failed">failed<' in page
    assert '<span class="mono">verifier_failed</span>' in page
    assert "verifier output at version w1" in page and "exited 1" in page
    assert f'href="/attachments/{digest}/"' in page
    assert "verifier.failed" in page  # the trace timeline shows the event with its payload
    download = client_for("operator").get(reverse("review:attachment", args=[digest]))
    assert download.status_code == 200
    assert b"".join(download.streaming_content if download.streaming else [download.content]) == (
        b"answer.txt holds '41\\n'\n")


def test_it_links_the_partial_output_of_a_command_that_timed_out(client_for, tmp_path, ratchet_keys) -> None:  # type: ignore[no-untyped-def]
    hangs = "import time; print('collecting tests', flush=True); time.sleep(60)"
    run_id = run_start(spec_path=write_command_task(tmp_path, argv=python(hangs), timeout_seconds=1),
                       worker="w")
    run_advance(run_id=run_id, worker="w")
    [opened] = trace_events(run_id, "review.opened")
    digest = opened["plugin_error"]["output_digest"]

    page = _page(client_for, run_id)

    assert '<span class="mono">verifier_error</span>' in page
    assert "VerifierCommandTimeoutError" in page
    assert "verifier output (stop detail)" in page and f'href="/attachments/{digest}/"' in page
