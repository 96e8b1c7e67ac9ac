"""Runs list: filters, search, pagination, checkpoint verdicts and live polling that stops."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from review.queries.runs_list import RUNS_PER_PAGE
from runtime.models import Checkpoint, HighWaterMark, Phase
from tests.review.rows import build_run


@pytest.fixture
def runs(checkpoint_keyring, personas) -> None:  # type: ignore[no-untyped-def]
    build_run(
        checkpoint_keyring,
        run_id="alpha-running",
        phase=Phase.RUNNING.value,
        tenant="acme",
        task="deploy",
        owner_worker="worker-7",
    )
    build_run(
        checkpoint_keyring,
        run_id="beta-review",
        phase=Phase.NEEDS_REVIEW.value,
        tenant="acme",
        task="billing",
        stop_reason="receipt_conflict",
    )
    build_run(
        checkpoint_keyring,
        run_id="gamma-done",
        phase=Phase.COMPLETED.value,
        tenant="globex",
        task="deploy",
        stop_reason="verified",
    )


def _run_ids(content: bytes) -> list[str]:
    return re.findall(r'href="/runs/([^/"]+)/"', content.decode())


def test_it_lists_runs_with_phase_lease_and_a_verified_checkpoint(client_for, runs) -> None:
    page = client_for("operator").get(reverse("review:runs")).content.decode()
    assert set(_run_ids(page.encode())) == {"alpha-running", "beta-review", "gamma-done"}
    assert 'class="badge phase-needs_review">needs review<' in page
    assert "receipt_conflict" in page
    assert "worker-7" in page
    assert page.count('tone-ok">verified<') == 3


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("phase=running", {"alpha-running"}),
        ("tenant=acme", {"alpha-running", "beta-review"}),
        ("task=deploy", {"alpha-running", "gamma-done"}),
        ("tenant=acme&task=deploy", {"alpha-running"}),
        ("q=beta", {"beta-review"}),
        ("q=review", set()),
    ],
)
def test_it_filters_by_phase_tenant_task_and_run_id(
    client_for, runs, query: str, expected: set[str]
) -> None:
    response = client_for("reviewer").get(reverse("review:runs") + "?" + query)
    assert set(_run_ids(response.content)) == expected


def test_it_paginates_with_links_that_work_without_javascript(
    client_for, checkpoint_keyring, personas
) -> None:
    for i in range(RUNS_PER_PAGE + 2):
        build_run(checkpoint_keyring, run_id=f"run-{i:03d}", tenant="acme", events=0)
    client = client_for("operator")
    first = client.get(reverse("review:runs") + "?tenant=acme").content.decode()
    assert len(_run_ids(first.encode())) == RUNS_PER_PAGE
    link = re.search(r'<a href="(\?[^"]*after=[^"]*)" hx-get="\1"', first)
    assert link, "the next-page link is a real href with the same hx-get"
    second = client.get(reverse("review:runs") + link.group(1).replace("&amp;", "&"))
    assert len(_run_ids(second.content)) == 2
    assert "tenant=acme" in link.group(1)


def test_it_flags_a_run_whose_committed_checkpoint_was_tampered_with(client_for, runs) -> None:
    row = Checkpoint.objects.get(run_id="gamma-done")
    forged = bytes(row.envelope).replace(b'"v0"', b'"v9"')
    # Bypass the append-only guard the way an attacker with database access would.
    Checkpoint.objects.filter(pk=row.pk).update(envelope=forged)
    from runtime.core.canonical import digest_bytes

    HighWaterMark.objects.filter(run_id="gamma-done").update(checkpoint_digest=digest_bytes(forged))
    page = client_for("operator").get(reverse("review:runs")).content.decode()
    assert page.count('tone-ok">verified<') == 2
    assert ">signature invalid<" in page


def test_it_flags_a_run_whose_high_water_mark_is_missing(client_for, runs) -> None:
    HighWaterMark.objects.filter(run_id="alpha-running").delete()
    page = client_for("operator").get(reverse("review:runs")).content.decode()
    assert ">HWM missing<" in page


def _poll_token(html: str) -> str:
    poller = re.search(r'<div id="poller"[^>]*>', html).group(0)
    assert 'hx-trigger="every 2s, ratchet:visible"' in poller and "data-poll" in poller
    return re.search(r'"since": "([0-9a-f]+)"', poller).group(1)


def test_it_polls_and_answers_204_while_nothing_on_the_page_changed(client_for, runs) -> None:
    client = client_for("operator")
    token = _poll_token(client.get(reverse("review:runs")).content.decode())
    poll = client.get(reverse("review:runs"), {"since": token}, headers={"HX-Request": "true"})
    assert poll.status_code == 204


def test_a_new_run_appears_on_the_next_poll(client_for, runs, checkpoint_keyring) -> None:
    client = client_for("operator")
    token = _poll_token(client.get(reverse("review:runs") + "?tenant=acme").content.decode())
    build_run(checkpoint_keyring, run_id="delta-new", tenant="acme", events=0)
    poll = client.get(reverse("review:runs"), {"tenant": "acme", "since": token},
                      headers={"HX-Request": "true"}).content.decode()
    assert re.search(r'<section id="runs"[^>]*hx-swap-oob="true"', poll)
    assert "delta-new" in poll and 'hx-get="/?tenant=acme"' in poll
    assert '<div id="live-announcer" hx-swap-oob="innerHTML">Runs list updated.' in poll


def test_every_htmx_link_is_also_a_real_link(client_for, runs) -> None:
    page = client_for("operator").get(reverse("review:runs")).content.decode()
    for tag in re.findall(r"<a\b[^>]*>", page):
        if "hx-get" in tag:
            assert re.search(r'href="[^"]+"', tag), tag
    form = re.search(r'<form class="filters"[^>]*>', page, re.S).group(0)
    assert 'method="get"' in form and 'action="/"' in form, (
        "the filter form works without JavaScript"
    )
