"""Trace evidence browser (admin only): filter by run, event type and environment version."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.queries.trace import EVENTS_PER_PAGE, TraceFilters, trace_search
from runtime.models import TraceEvent
from tests.review.rows import add_events, build_run


@pytest.fixture
def trace(checkpoint_keyring, personas) -> None:  # type: ignore[no-untyped-def]
    one = build_run(
        checkpoint_keyring,
        run_id="run-one",
        events=2,
        event_type="step.observed",
        environment_version="v1",
    )
    add_events(
        one,
        1,
        event_type="recovery.succeeded",
        environment_version="v2",
        payload={"duration_seconds": 1.5},
    )
    build_run(
        checkpoint_keyring,
        run_id="run-two",
        events=3,
        event_type="step.observed",
        environment_version="v2",
    )


def _rows(client_for, query: str = "") -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    page = client_for("admin").get(reverse("review:trace") + query).content.decode()
    return re.findall(r'<a href="/runs/([^/]+)/">.*?</a></td>\s*<td>(\d+)</td>', page, re.S)


def test_it_lists_events_across_runs_newest_first(client_for, trace) -> None:
    rows = _rows(client_for)
    assert len(rows) == 6
    assert rows[0] == ("run-two", "3")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?run=run-one", 3),
        ("?event_type=recovery.succeeded", 1),
        ("?environment_version=v2", 4),
        ("?run=run-two&environment_version=v1", 0),
    ],
)
def test_it_filters_by_run_event_type_and_environment_version(
    client_for, trace, query: str, expected: int
) -> None:
    assert len(_rows(client_for, query)) == expected


def test_it_checks_the_chain_of_the_run_it_is_filtered_to(client_for, trace) -> None:
    page = client_for("admin").get(reverse("review:trace") + "?run=run-one").content.decode()
    assert "Run chain:" in page and ">not checked<" in page, "a page view does not re-hash"
    page = client_for("admin").get(reverse("review:trace") + "?run=run-one&verify=chain").content.decode()
    assert ">verifies<" in page
    TraceEvent.objects.filter(run_id="run-one", seq=3).update(environment_version="v3")
    page = client_for("admin").get(reverse("review:trace") + "?run=run-one&verify=chain").content.decode()
    assert ">broken<" in page and "at seq 3" in page


def test_it_follows_a_partial_run_id(client_for, trace) -> None:
    page = client_for("admin").get(reverse("review:trace") + "?run=run-o").content.decode()
    assert "Run chain:" in page and len(_rows(client_for, "?run=run-o")) == len(
        _rows(client_for, "?run=run-one"))
    several = client_for("admin").get(reverse("review:trace") + "?run=run-").content.decode()
    assert "starts 2 run ids" in several


def test_it_offers_the_known_event_types(client_for, trace) -> None:
    page = client_for("admin").get(reverse("review:trace")).content.decode()
    assert (
        '<option value="recovery.succeeded">' in page and '<option value="step.observed">' in page
    )


def test_it_answers_a_filter_change_with_the_events_fragment(client_for, trace) -> None:
    response = client_for("admin").get(
        reverse("review:trace") + "?event_type=step.observed", headers={"HX-Request": "true"}
    )
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="events"') and "<html" not in body
    assert "Newest events: 5 shown" in body


def test_it_pages_the_events_of_several_matched_runs_newest_first(checkpoint_keyring, personas) -> None:  # type: ignore[no-untyped-def]
    """Each matched run is read newest-first through its own index and the parts are merged by
    id: interleaved runs, each longer than a page, come out in exactly the order of one sorted
    read, across the keyset pages (``review.queries.trace``)."""
    runs = [build_run(checkpoint_keyring, run_id=f"merge-{n}", events=1) for n in range(3)]
    build_run(checkpoint_keyring, run_id="other-run", events=5)
    for _ in range(EVENTS_PER_PAGE):
        for run in runs:
            add_events(run, 1)
    expected = list(TraceEvent.objects.filter(run__run_id__startswith="merge-").order_by("-id")
                    .values_list("id", flat=True))
    admin = personas["admin"]
    seen: list[int] = []
    before = ""
    with CaptureQueriesContext(connection) as queries:
        while True:
            page = trace_search(user=admin, filters=TraceFilters(run="merge-"), before=before)
            seen.extend(event.id for event in page.events)
            if not page.next_before:
                break
            before = page.next_before
    assert seen == expected and len(seen) > 2 * EVENTS_PER_PAGE
    reads = [q["sql"] for q in queries.captured_queries if "UNION ALL" in q["sql"]]
    assert len(reads) == -(-len(expected) // EVENTS_PER_PAGE), "one statement a page"
    assert all(read.count('ORDER BY "runtime_traceevent"."seq" DESC') == len(runs) for read in reads), (
        "each run through its (run, seq) index")
