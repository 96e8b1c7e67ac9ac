"""The approvals queue shows each waiting action with its risk, dry-run diff, environment version
and fingerprint and approval state, and offers exactly the actions that state allows:
approve and deny a waiting write, refresh an expired approval (DESIGN.md sections 6.2 and 6.6)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from review.queries.approvals import APPROVALS_PER_PAGE, diff_lines
from runtime.decisions.approvals import approvals_waiting
from tests.review.stories import approval_run, expired_approval_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(tmp_path, ratchet_keys, enqueued) -> str:  # type: ignore[no-untyped-def]
    return approval_run(tmp_path / "waiting")


def _card(html: str, run_id: str) -> str:
    match = re.search(
        rf'<article class="card approval" id="approval-{run_id}".*?</article>', html, re.S
    )
    assert match, f"no card for run {run_id}"
    return match.group(0)


def test_it_shows_the_action_risk_environment_and_dry_run_diff(client_for, waiting) -> None:
    [item] = approvals_waiting(run_ids=[waiting])
    html = client_for("operator").get(reverse("review:approvals")).content.decode()
    card = _card(html, waiting)
    assert (
        '<span class="mono">write_file</span> <span class="mono break">limits.toml</span>' in card
    )
    assert '<span class="badge tone-bad">high risk</span>' in card
    assert item.environment_version in card and item.environment_fingerprint in card
    assert item.intent_digest in card and item.idempotency_key in card
    assert "not approved yet" in card
    assert '<pre class="diff"' in card
    assert '<span class="diff-add">+max_orders = 3</span>' in card
    assert '<span class="diff-add">+max_refunds = 1</span>' in card
    assert '<span class="diff-hunk">@@' in card


def test_it_offers_approve_and_deny_for_a_fresh_action_carrying_the_fingerprint_shown(
    client_for, waiting
) -> None:
    [item] = approvals_waiting(run_ids=[waiting])
    card = _card(client_for("operator").get(reverse("review:approvals")).content.decode(), waiting)
    assert f'action="/approvals/{waiting}/approve/"' in card
    assert f'action="/approvals/{waiting}/deny/"' in card
    assert f"/approvals/{waiting}/refresh/" not in card
    assert f'name="environment_fingerprint" value="{item.environment_fingerprint}"' in card
    assert card.count('name="csrfmiddlewaretoken"') == 2, "every form is a POST with CSRF"


def test_it_offers_refresh_instead_of_approve_once_the_approval_expired(
    client_for, tmp_path, ratchet_keys, enqueued
) -> None:
    run_id = expired_approval_run(tmp_path / "expired")
    card = _card(client_for("operator").get(reverse("review:approvals")).content.decode(), run_id)
    assert "approval expired" in card
    assert f'action="/approvals/{run_id}/refresh/"' in card
    assert f"/approvals/{run_id}/approve/" not in card
    assert "approval not usable: expired" in card, "the runtime's reason is shown"


def test_it_filters_to_one_run_and_answers_htmx_with_the_queue_only(
    client_for, waiting, tmp_path
) -> None:
    other = approval_run(tmp_path / "other")
    client = client_for("admin")
    page = client.get(reverse("review:approvals") + f"?run={other}").content.decode()
    assert f'id="approval-{other}"' in page and f'id="approval-{waiting}"' not in page
    fragment = client.get(reverse("review:approvals"), headers={"HX-Request": "true"})
    body = fragment.content.decode()
    assert "<html" not in body and body.lstrip().startswith('<section id="approvals"')
    assert f'id="approval-{other}"' in body and f'id="approval-{waiting}"' in body


def test_it_paginates_with_a_fixed_page_size(client_for, tmp_path, ratchet_keys, enqueued) -> None:
    runs = [approval_run(tmp_path / f"run{i}") for i in range(APPROVALS_PER_PAGE + 1)]
    client = client_for("operator")
    first = client.get(reverse("review:approvals")).content.decode()
    second = client.get(reverse("review:approvals") + "?page=2").content.decode()
    assert first.count('<article class="card approval"') == APPROVALS_PER_PAGE
    assert second.count('<article class="card approval"') == 1
    assert f"{len(runs)} runs waiting" in first and "page 1 of 2" in first
    assert f'id="approval-{runs[-1]}"' in second, "longest waiting first"


def test_it_classifies_diff_lines_for_display() -> None:
    text = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n"
    assert [line.kind for line in diff_lines(text)] == [
        "meta",
        "meta",
        "meta",
        "hunk",
        "del",
        "add",
        "ctx",
    ]


def test_it_tells_the_operator_when_nothing_is_waiting(client_for, db) -> None:
    html = client_for("operator").get(reverse("review:approvals")).content.decode()
    assert "No action is waiting for an approval." in html
