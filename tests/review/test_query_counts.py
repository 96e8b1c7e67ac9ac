"""Query counts of the runs list, run detail, approvals queue and review cases pages stay
constant as runs, checkpoints and trace events grow tenfold (DESIGN.md section 6.8)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.queries.approvals import APPROVALS_PER_PAGE
from review.queries.runs_list import RUNS_PER_PAGE
from runtime.models import Phase, Run
from tests.factories import make_state
from tests.review.rows import (
    add_events,
    build_case,
    build_run,
    build_waiting_run,
    pending_state,
)

N = 3


def _grow_runs(keyring, count: int, *, start: int) -> None:  # type: ignore[no-untyped-def]
    phases = [
        Phase.RUNNING.value,
        Phase.PENDING.value,
        Phase.COMPLETED.value,
        Phase.NEEDS_REVIEW.value,
    ]
    for i in range(start, start + count):
        build_run(
            keyring,
            run_id=f"run-{i:04d}",
            phase=phases[i % len(phases)],
            tenant=f"tenant-{i % 3}",
            task=f"task-{i % 2}",
            generations=2,
            events=5,
            owner_worker=f"worker-{i}",
        )


def _count(client, url: str, **headers: str) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, headers=headers or None)
    assert response.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "poll-fragment"])
def test_runs_list_queries_do_not_grow_with_ten_times_the_runs(
    client_for, checkpoint_keyring, django_assert_num_queries, htmx: bool
) -> None:
    client = client_for("operator")
    headers = {"HX-Request": "true"} if htmx else {}
    url = reverse("review:runs")
    _grow_runs(checkpoint_keyring, N, start=0)
    client.get(url)  # warm per-process caches (content types, templates)
    baseline = _count(client, url, **headers)

    _grow_runs(checkpoint_keyring, 9 * N, start=N)
    assert Run.objects.count() == 10 * N
    with django_assert_num_queries(baseline):
        response = client.get(url, headers=headers or None)
    assert response.content.count(b'<th scope="row">') == min(10 * N, RUNS_PER_PAGE)


def test_runs_list_filtered_queries_do_not_grow(
    client_for, checkpoint_keyring, django_assert_num_queries
) -> None:
    client = client_for("admin")
    url = reverse("review:runs") + "?phase=running&tenant=tenant-0&q=run"
    _grow_runs(checkpoint_keyring, N, start=0)
    client.get(url)
    baseline = _count(client, url)
    _grow_runs(checkpoint_keyring, 9 * N, start=N)
    with django_assert_num_queries(baseline):
        assert client.get(url).status_code == 200


@pytest.mark.parametrize("target", ["", "run-status", "checkpoints", "timeline"])
def test_run_detail_queries_do_not_grow_with_ten_times_the_runs_checkpoints_and_events(
    client_for, checkpoint_keyring, django_assert_num_queries, target: str
) -> None:
    client = client_for("reviewer")
    headers = {"HX-Request": "true", "HX-Target": target} if target else {}
    _grow_runs(checkpoint_keyring, N, start=0)
    state = pending_state(make_state(run_id="run-detail"))
    run = build_run(
        checkpoint_keyring,
        run_id="run-detail",
        phase=Phase.PENDING.value,
        state=state,
        generations=2,
        events=5,
        owner_worker="worker-x",
    )
    url = reverse("review:run", args=[run.run_id])
    client.get(url, headers=headers or None)
    baseline = _count(client, url, **headers)

    _grow_runs(checkpoint_keyring, 9 * N, start=N)
    add_events(run, 45)
    state = pending_state(make_state(run_id="run-detail-2"))  # a valid run, so all of it renders
    more = build_run(
        checkpoint_keyring, run_id="run-detail-2", phase=Phase.PENDING.value, state=state,
        generations=20, events=50,
    )
    url_more = reverse("review:run", args=[more.run_id])
    with django_assert_num_queries(baseline):
        assert client.get(url, headers=headers or None).status_code == 200
    with django_assert_num_queries(baseline):
        assert client.get(url_more, headers=headers or None).status_code == 200


# --- approvals and review cases (second half of the dashboard) -------------------------------


def _grow_waiting(keyring, count: int, *, start: int, events: int = 3) -> None:  # type: ignore[no-untyped-def]
    for i in range(start, start + count):
        build_waiting_run(keyring, run_id=f"wait-{i:04d}", events=events)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "fragment"])
def test_approvals_queries_do_not_grow_with_ten_times_the_waiting_runs_and_events(
    client_for, checkpoint_keyring, django_assert_num_queries, htmx: bool
) -> None:
    client = client_for("operator")
    headers = {"HX-Request": "true"} if htmx else {}
    url = reverse("review:approvals")
    _grow_waiting(checkpoint_keyring, APPROVALS_PER_PAGE, start=0)  # a full first page
    _grow_runs(checkpoint_keyring, N, start=0)
    client.get(url)
    baseline = _count(client, url, **headers)

    _grow_waiting(checkpoint_keyring, 9 * APPROVALS_PER_PAGE, start=APPROVALS_PER_PAGE, events=30)
    _grow_runs(checkpoint_keyring, 9 * N, start=N)
    for run in Run.objects.filter(phase=Phase.AWAITING_APPROVAL.value)[:APPROVALS_PER_PAGE]:
        add_events(run, 27)
    waiting = Run.objects.filter(phase=Phase.AWAITING_APPROVAL.value)
    assert waiting.count() == 10 * APPROVALS_PER_PAGE
    with django_assert_num_queries(baseline):
        response = client.get(url, headers=headers or None)
    assert response.content.count(b'<article class="card approval"') == APPROVALS_PER_PAGE
    assert response.content.count(b'<span class="diff-add">+new</span>') == APPROVALS_PER_PAGE


@pytest.mark.parametrize("query", ["", "?status=aborted", "?status=open"])
def test_cases_list_queries_do_not_grow_with_ten_times_the_cases(
    client_for, checkpoint_keyring, django_assert_num_queries, query: str
) -> None:
    client = client_for("reviewer")
    url = reverse("review:cases") + query

    def grow(count: int, start: int) -> None:
        for i in range(start, start + count):
            run = build_run(checkpoint_keyring, run_id=f"case-run-{i:04d}", events=5)
            build_case(run, case_id=f"case-{i:04d}", status="open" if i % 2 else "aborted")

    grow(N, 0)
    client.get(url)
    baseline = _count(client, url)
    grow(9 * N, N)
    with django_assert_num_queries(baseline):
        assert client.get(url).status_code == 200


def test_case_detail_queries_do_not_grow_with_ten_times_the_runs_and_events(
    client_for, checkpoint_keyring, django_assert_num_queries
) -> None:
    client = client_for("admin")
    run = build_run(checkpoint_keyring, run_id="case-detail-run", events=5)
    build_case(run, case_id="case-detail")
    url = reverse("review:case", args=["case-detail"])
    client.get(url)
    baseline = _count(client, url)
    _grow_runs(checkpoint_keyring, 9 * N, start=0)
    add_events(run, 45)
    with django_assert_num_queries(baseline):
        assert client.get(url).status_code == 200
