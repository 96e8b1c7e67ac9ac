"""Content search and partial ids on the runs list and the trace browser (DESIGN.md section 6.8):
a run is found by its commit message, an idempotency-key prefix, a file path or a partial run id,
only among the tenants the user may see, with a query count that does not grow with the data; a
bad filter value is a form error, not a silently ignored field."""

from __future__ import annotations

import re
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from review.scope import scope_set
from runtime.core.search_text import INTENT_EVENT, intent_terms, terms_covered
from runtime.evidence.search_terms import search_terms_record
from runtime.evidence.trace import trace_append
from runtime.models import RunSearchTerm, TraceEvent
from tests.review.rows import build_run
from tests.review.stories import completed_run

RUN_LINK = re.compile(r'href="/runs/([^/"]+)/"')


def _found(response) -> set[str]:  # type: ignore[no-untyped-def]
    """Run ids the page links to (runs list rows, trace event rows)."""
    assert response.status_code == 200, response.content[:500]
    return set(RUN_LINK.findall(response.content.decode()))


def _intent(*, key: str, message: str, paths: list[str]) -> dict:
    """A git commit's ``intent.proposed`` payload, as ``runtime.engine.propose`` writes it."""
    return {
        "idempotency_key": key, "intent_digest": "sha256:" + "0" * 64, "cursor": 0,
        "action": {"kind": "commit", "target": "", "risk": "low", "params": {
            "message": message, "author_name": "A", "author_email": "a@example.org",
            "author_date": "2026-03-01T00:00:00+00:00",
            "changes": [{"op": "write", "path": p, "content": "sha256:" + "1" * 64} for p in paths]}},
        "requires_approval": False, "expected_post_fingerprint": None,
    }


LEASE_COMMIT = {"key": "ratchet:git:def456:0001", "message": "Renew leases before they expire",
                "paths": ["runtime/ownership/leases.py", "docs/leases.md"]}


def _commit(run_id: str, *, key: str, message: str, paths: list[str]) -> None:
    """Record a git commit's intent in the run's trace, as ``runtime.engine.propose`` does."""
    trace_append(run_id=run_id, event_type="intent.proposed", payload=_intent(key=key, message=message, paths=paths))


@pytest.fixture
def commits(checkpoint_keyring, roles) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Three runs of two tenants, each with one recorded commit intent."""
    runs = {
        "budget": build_run(checkpoint_keyring, run_id="c0ffee01-budget", tenant="acme", events=1),
        "lease": build_run(checkpoint_keyring, run_id="c0ffee02-lease", tenant="acme", events=1),
        "other": build_run(checkpoint_keyring, run_id="d00d0003-other", tenant="globex", events=1),
    }
    _commit(runs["budget"].run_id, key="ratchet:git:abc123:0001",
            message="Fix the retry budget in the worker\n\nLonger body.", paths=["runtime/engine/budget.py"])
    _commit(runs["lease"].run_id, **LEASE_COMMIT)
    _commit(runs["other"].run_id, key="ratchet:git:abc999:0001",
            message="Fix the retry budget for globex", paths=["globex/engine/budget.py"])
    return {name: run.run_id for name, run in runs.items()}


def _runs(client: Client, **query: str) -> set[str]:
    return _found(client.get(reverse("review:runs"), query))


def _trace(client: Client, **query: str) -> set[str]:
    return _found(client.get(reverse("review:trace"), query))


@pytest.mark.django_db
def test_it_finds_runs_by_commit_message_key_prefix_file_path_and_action(client_for, commits) -> None:
    client = client_for("admin")
    assert _runs(client, q="retry budget") == {commits["budget"], commits["other"]}
    assert _runs(client, q="Budget WORKER") == {commits["budget"]}, "words anywhere, any case"
    assert _runs(client, q="renew leases before") == {commits["lease"]}, "the message's first line"
    assert _runs(client, q="ratchet:git:abc") == {commits["budget"], commits["other"]}
    assert _runs(client, q="ratchet:git:abc1") == {commits["budget"]}
    assert _runs(client, q="engine/budget") == {commits["budget"], commits["other"]}, "from a folder on"
    assert _runs(client, q="leases.md") == {commits["lease"]}, "a file name"
    assert _runs(client, q="runtime/ownership/leases.py") == {commits["lease"]}, "a whole path"
    assert _runs(client, q="commit") == set(commits.values()), "the action's kind"
    assert _runs(client, q="nothing-like-this") == set()


@pytest.mark.django_db
def test_it_finds_runs_by_content_and_partial_id_on_the_trace_page(client_for, commits) -> None:
    client = client_for("admin")
    assert _trace(client, q="renew") == {commits["lease"]}
    assert _trace(client, q="ratchet:git:abc1") == {commits["budget"]}
    assert _trace(client, q="budget.py") == {commits["budget"], commits["other"]}
    assert _trace(client, run="c0ffee") == {commits["budget"], commits["lease"]}, "a partial run id"
    assert _trace(client, run="c0ffee", q="renew") == {commits["lease"]}, "both: the runs both name"
    page = client.get(reverse("review:trace"), {"q": "no-such-content"}).content.decode()
    assert "No run matches" in page


@pytest.mark.django_db
def test_it_finds_runs_by_a_partial_run_id_on_the_runs_list(client_for, commits) -> None:
    client = client_for("operator")
    assert _runs(client, q="c0ffee") == {commits["budget"], commits["lease"]}
    assert _runs(client, q="d00d") == {commits["other"]}


@pytest.mark.django_db
def test_it_never_shows_a_scoped_user_another_tenants_runs_in_search(commits, django_user_model) -> None:
    user = django_user_model.objects.create_user(username="acme-admin", password="x")
    user.groups.add(Group.objects.get(name="admin"))
    scope_set(user=user, tenant_ids=["acme"])
    client = Client()
    client.force_login(user)
    assert _runs(client, q="retry budget") == {commits["budget"]}
    assert _runs(client, q="ratchet:git:abc") == {commits["budget"]}
    assert _runs(client, q="d00d") == set(), "nor by a partial id"
    assert _trace(client, q="globex") == set()
    assert _trace(client, q="budget.py") == {commits["budget"]}
    assert _trace(client, run="d00d") == set()


@pytest.mark.django_db
def test_it_keeps_a_search_to_the_same_queries_with_ten_times_the_matching_runs(
    client_for, checkpoint_keyring, roles, django_assert_num_queries
) -> None:
    client = client_for("admin")

    def grow(start: int, count: int) -> None:
        for i in range(start, start + count):
            run = build_run(checkpoint_keyring, run_id=f"grow-{i:04d}", tenant=f"tenant-{i % 3}", events=1)
            _commit(run.run_id, key=f"ratchet:git:grow:{i:04d}", message=f"Tune the queue depth #{i}",
                    paths=[f"runtime/queues/q{i}.py"])

    urls = [reverse("review:runs") + "?q=queue+depth", reverse("review:runs") + "?q=ratchet:git:grow",
            reverse("review:trace") + "?q=runtime/queues"]
    grow(0, 3)
    baselines = []
    for url in urls:
        client.get(url)  # warm per-process caches (templates, content types)
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        baselines.append(len(ctx.captured_queries))
    grow(3, 27)
    for url, baseline in zip(urls, baselines, strict=True):
        with django_assert_num_queries(baseline):
            response = client.get(url)
        assert len(_found(response)) > 3, "the page shows the new matches"


@pytest.mark.django_db
def test_it_records_the_terms_of_a_replayed_intent_once(commits) -> None:
    run_id = commits["lease"]
    before = RunSearchTerm.objects.filter(run_id=run_id).count()
    payload = _intent(**LEASE_COMMIT)
    assert search_terms_record(run_id=run_id, events=[("intent.proposed", payload)]) > 0
    assert RunSearchTerm.objects.filter(run_id=run_id).count() == before
    assert search_terms_record(run_id=run_id, events=[("lease.acquired", payload)]) == 0


@pytest.mark.django_db(transaction=True)
def test_it_finds_a_run_the_engine_drove_by_the_file_it_wrote(client_for, ratchet_keys, tmp_path) -> None:
    run_id = completed_run(tmp_path)
    client = client_for("admin")
    assert _runs(client, q="b.txt") == {run_id}, "terms are written with the intent's checkpoint commit"
    assert _runs(client, q="write_file") == {run_id}
    assert _trace(client, q="a.txt") == {run_id}
    assert _trace(client, run=run_id[:6]) == {run_id}


@pytest.mark.django_db
@pytest.mark.parametrize(("query", "field", "message"), [
    ({"created_from": "2026-01-01"}, "", "unknown filter: created_from"),
    ({"from": "notadate"}, "from", "enter a day as YYYY-MM-DD (UTC)"),
    ({"to": "2026-13-40"}, "to", "enter a day as YYYY-MM-DD (UTC)"),
    ({"from": "2026-03-02", "to": "2026-03-01"}, "to", "the range ends before it starts"),
    ({"phase": "not-a-phase"}, "phase", "Select a valid choice"),
    ({"sort": "-secret_column"}, "sort", "Select a valid choice"),
])
def test_it_answers_a_bad_runs_filter_with_a_form_error(client_for, commits, query, field, message) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:runs"), query)
    assert page.status_code == 400
    html = page.content.decode()
    assert message in html
    assert 'role="alert"' in html
    assert not RUN_LINK.search(html), "no list that silently ignores the filter"
    if field:
        assert f'id="runs-{field}-error"' in html or f"<strong>{field}</strong>" in html
    fragment = client.get(reverse("review:runs"), query, headers={"HX-Request": "true"})
    assert fragment.status_code == 200, "htmx swaps only 2xx answers: the error replaces the table"
    assert message in fragment.content.decode()


@pytest.mark.django_db
def test_it_answers_a_bad_trace_filter_with_a_form_error(client_for, commits) -> None:
    client = client_for("admin")
    for query, message in (({"before": "abc"}, "a page cursor is an event id"),
                           ({"runid": "c0ffee"}, "unknown filter: runid")):
        page = client.get(reverse("review:trace"), query)
        assert page.status_code == 400
        assert message in page.content.decode()


@pytest.mark.django_db
def test_the_migration_removes_covered_terms_stored_before_and_every_search_still_finds_the_same_runs(
        client_for, commits) -> None:
    # Stored as before covered terms were left out: every term of every intent, of each kind.
    for run_id, payload in TraceEvent.objects.filter(event_type=INTENT_EVENT).values_list("run_id", "payload"):
        RunSearchTerm.objects.bulk_create([RunSearchTerm(run_id=run_id, kind=kind, term=term)
                                           for kind, term in intent_terms(payload)], ignore_conflicts=True)
    client = client_for("admin")
    queries = ["retry budget", "Budget WORKER", "renew", "renew leases before", "ratchet:git:abc1", "engine/budget",
               "leases", "leases.md", "fix", "fix the", "commit", "runtime/ownership/leases.py", "globex", "expire"]
    found_before = {q: _runs(client, q=q) for q in queries}
    rows_before = RunSearchTerm.objects.count()

    import_module("runtime.migrations.0016_search_terms_covered").compact(apps, SimpleNamespace(connection=connection))

    assert RunSearchTerm.objects.count() < rows_before
    for run_id in commits.values():
        texts = list(RunSearchTerm.objects.filter(run_id=run_id).values_list("term", flat=True))
        assert len(texts) == len(set(texts)) and not terms_covered(texts)
    assert {q: _runs(client, q=q) for q in queries} == found_before
    assert found_before["renew"] == {commits["lease"]}
    assert found_before["fix the"] == {commits["budget"], commits["other"]}
