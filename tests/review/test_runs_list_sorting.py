"""Runs list: sortable columns with keyset pages that stay correct per order, a date range,
run-id prefixes and idempotency-key prefixes (DESIGN.md section 6.8)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from review.queries.runs_list import RUNS_PER_PAGE, SORTS, RunFilters, run_list
from runtime.models import IdempotencyRecord, Phase, Run
from tests.review.rows import build_run

START = datetime(2026, 3, 1, tzinfo=UTC)
PHASES = [Phase.RUNNING, Phase.COMPLETED, Phase.FAILED, Phase.PENDING, Phase.CANCELLED]


@pytest.fixture
def many_runs(checkpoint_keyring, personas) -> list[str]:  # type: ignore[no-untyped-def]
    ids = []
    for i in range(RUNS_PER_PAGE * 2 + 5):
        run_id = f"r{(i * 37) % 101:03d}-{i:02d}"
        build_run(checkpoint_keyring, run_id=run_id, tenant=f"tenant-{i % 3}", task=f"task-{i % 4}", events=0,
                  phase=PHASES[i % len(PHASES)].value)
        # A few equal timestamps, so the run-id tie-breaker is exercised across page borders.
        Run.objects.filter(run_id=run_id).update(created_at=START + timedelta(hours=5 * (i // 3)),
                                                  updated_at=START + timedelta(days=i % 7))
        ids.append(run_id)
    return ids


def _walk(sort: str) -> list[str]:
    seen, cursor = [], ""
    while True:
        page = run_list(filters=RunFilters(), cursor=cursor, sort=sort)
        seen += [row.run.run_id for row in page.rows]
        if not page.next_cursor:
            return seen
        cursor = page.next_cursor


@pytest.mark.parametrize("key", sorted(SORTS))
@pytest.mark.parametrize("descending", [True, False])
def test_its_keyset_pages_walk_every_run_once_in_each_order(many_runs, key: str, descending: bool) -> None:
    column = SORTS[key]
    rows = list(Run.objects.values_list(column, "run_id"))
    expected = [run_id for _, run_id in sorted(rows, reverse=descending)]
    assert _walk(("-" if descending else "") + key) == expected


def test_an_unknown_sort_key_is_the_default_order(many_runs) -> None:
    assert _walk("spec; DROP TABLE runtime_run") == _walk("-created")


def _run_ids(html: str) -> list[str]:
    return re.findall(r'href="/runs/([^/"]+)/"', html)


def test_its_headers_sort_and_say_so(client_for, many_runs) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:runs") + "?sort=tenant").content.decode()
    assert re.search(r'<th scope="col" aria-sort="ascending"><a href="\?sort=-tenant"', page)
    assert 'aria-sort="descending"' not in page
    tenants = [Run.objects.get(run_id=r).tenant_id for r in _run_ids(page)]
    assert tenants == sorted(tenants)
    nxt = re.search(r'<a href="(\?[^"]*after=[^"]*)"[^>]*rel="next"', page).group(1).replace("&amp;", "&")
    assert "sort=tenant" in nxt, "the next page keeps the order"
    default = client.get(reverse("review:runs")).content.decode()
    assert 'aria-sort="descending"><a href="?sort=created"' in default


def test_it_filters_by_a_date_range_on_created_or_updated(client_for, many_runs) -> None:
    client = client_for("operator")
    created = client.get(reverse("review:runs"), {"from": "2026-03-01", "to": "2026-03-01"}).content.decode()
    assert set(_run_ids(created)) == set(Run.objects.filter(created_at__lt=START + timedelta(days=1))
                                         .values_list("run_id", flat=True))
    updated = client.get(reverse("review:runs"), {"date_field": "updated", "from": "2026-03-03",
                                                  "to": "2026-03-03"}).content.decode()
    assert set(_run_ids(updated)) == {r for i, r in enumerate(many_runs) if i % 7 == 2}
    bad = client.get(reverse("review:runs"), {"from": "yesterday"})
    assert bad.status_code == 400, "an invalid date is a form error (tests/review/test_content_search.py)"


def test_it_finds_runs_by_a_run_id_prefix_and_an_idempotency_key_prefix(client_for, many_runs) -> None:
    client = client_for("reviewer")
    prefix = many_runs[3][:3]
    found = set(_run_ids(client.get(reverse("review:runs"), {"q": prefix}).content.decode()))
    assert found == {r for r in many_runs if r.startswith(prefix)}
    IdempotencyRecord.objects.create(run_id=many_runs[5], idempotency_key="ratchet:git:abc123:0001",
                                     intent_digest="sha256:" + "0" * 64)
    IdempotencyRecord.objects.create(run_id=many_runs[6], idempotency_key="ratchet:git:abd999:0001",
                                     intent_digest="sha256:" + "0" * 64)
    by_key = client.get(reverse("review:runs"), {"key": "ratchet:git:abc"}).content.decode()
    assert _run_ids(by_key) == [many_runs[5]]
    both = client.get(reverse("review:runs"), {"key": "ratchet:git:ab", "sort": "run"}).content.decode()
    assert _run_ids(both) == sorted([many_runs[5], many_runs[6]])
