"""On real runs: a well-formed approve, refresh, deny, cancel or decision without the CSRF token
changes nothing at all -- not the run, not its checkpoint generation, not its trace -- and the same
request with the token does (every change is a POST with CSRF; DESIGN.md section 6.6)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runtime.models import Run
from tests.review.conftest import PASSWORD
from tests.review.stories import approval_run, conflict_run, expired_approval_run, hidden

pytestmark = pytest.mark.django_db(transaction=True)


def _snapshot(run_id: str) -> tuple:
    run = Run.objects.get(run_id=run_id)
    return (run.phase, run.generation, run.trace_seq, run.trace_head, run.cancel_requested)


def _token(client: Client) -> str:
    client.get(reverse("review:runs"))
    return client.cookies["csrftoken"].value


@pytest.fixture
def runs(tmp_path, ratchet_keys, enqueued) -> dict[str, str]:  # type: ignore[no-untyped-def]
    conflict = conflict_run(tmp_path / "conflict")
    return {
        "approve": approval_run(tmp_path / "approve"),
        "deny": approval_run(tmp_path / "deny"),
        "refresh": expired_approval_run(tmp_path / "refresh"),
        "decide": conflict.run_id,
        "case": conflict.case_id,
    }


def _requests(client: Client, runs: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    queue = client.get(reverse("review:approvals")).content.decode()
    fingerprints = {
        name: hidden(queue.split(f'id="approval-{runs[name]}"')[1], "environment_fingerprint")
        for name in ("approve", "refresh")
    }
    case_page = client.get(reverse("review:case", args=[runs["case"]])).content.decode()
    return [
        (
            runs["approve"],
            reverse("review:approve", args=[runs["approve"]]),
            {"environment_fingerprint": fingerprints["approve"]},
        ),
        (
            runs["refresh"],
            reverse("review:refresh", args=[runs["refresh"]]),
            {"environment_fingerprint": fingerprints["refresh"]},
        ),
        (runs["deny"], reverse("review:deny", args=[runs["deny"]]), {"reason": "no"}),
        (
            runs["decide"],
            reverse("review:decide", args=[runs["case"]]),
            {"decision": "abort", "password": PASSWORD, "binding": hidden(case_page, "binding")},
        ),
    ]


def test_no_change_goes_through_without_the_token_and_each_does_with_it(client_for, runs) -> None:
    client = client_for("admin", enforce_csrf_checks=True)
    requests = _requests(client, runs)
    before = {run_id: _snapshot(run_id) for run_id, _, _ in requests}

    for _, url, data in requests:
        response = client.post(url, data)
        assert response.status_code == 403 and b"security token" in response.content, url
    assert {run_id: _snapshot(run_id) for run_id, _, _ in requests} == before

    token = _token(client)
    for run_id, url, data in requests:
        assert client.post(url, {**data, "csrfmiddlewaretoken": token}).status_code == 303, url
        assert _snapshot(run_id) != before[run_id], f"{url} changed the run"


def test_cancel_needs_the_token_too(client_for, tmp_path, ratchet_keys) -> None:
    from runtime.engine import run_advance, run_start
    from tests.factories import write_scripted_task
    from tests.review.stories import CONFLICT_STEPS

    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=CONFLICT_STEPS))
    run_advance(run_id=run_id, max_steps=1)
    client = client_for("operator", enforce_csrf_checks=True)
    url = reverse("review:run-cancel", args=[run_id])
    assert client.post(url).status_code == 403
    assert not Run.objects.get(run_id=run_id).cancel_requested
    assert client.post(url, {"csrfmiddlewaretoken": _token(client)}).status_code == 303
    assert Run.objects.get(run_id=run_id).cancel_requested
