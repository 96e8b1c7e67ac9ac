"""Review cases: a list with a status filter, and a case page with the pending intent beside the
conflicting receipt (differing fields highlighted), fingerprints, the trace excerpt and the exact
binding a decision is signed over (DESIGN.md section 6.3)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from runtime.decisions.reviews import decision_prepare
from runtime.models import ReviewCase
from tests.review.stories import conflict_run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conflict(tmp_path, ratchet_keys, enqueued):  # type: ignore[no-untyped-def]
    return conflict_run(tmp_path)


def _row(html: str, label: str) -> str:
    match = re.search(
        rf'<tr class="(differs)?">\s*<th scope="row">{re.escape(label)}.*?</tr>', html, re.S
    )
    assert match, f"no comparison row {label!r}"
    return match.group(0)


def test_it_lists_cases_open_first_and_filters_by_status(client_for, conflict) -> None:
    client = client_for("reviewer")
    html = client.get(reverse("review:cases")).content.decode()
    assert f'href="/cases/{conflict.case_id}/"' in html
    assert "receipt_conflict" in html and 'class="badge phase-needs_review"' in html
    assert (
        f'href="/cases/{conflict.case_id}/"'
        not in client.get(reverse("review:cases") + "?status=aborted").content.decode()
    )
    fragment = client.get(reverse("review:cases") + "?status=open", headers={"HX-Request": "true"})
    assert fragment.content.decode().lstrip().startswith('<section id="cases"')


def test_it_highlights_the_intent_digest_that_differs_and_not_the_shared_key(
    client_for, conflict
) -> None:
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    html = (
        client_for("reviewer").get(reverse("review:case", args=[conflict.case_id])).content.decode()
    )
    key_row = _row(html, "Idempotency key")
    assert 'class="differs"' not in key_row and key_row.count(conflict.key) == 2
    digest_row = _row(html, "Intent digest")
    assert digest_row.startswith('<tr class="differs">')
    assert (
        case.pending["intent_digest"] in digest_row and case.receipt["intent_digest"] in digest_row
    )
    assert case.receipt["receipt_id"] in _row(html, "Receipt id")
    assert case.receipt["namespace"] in _row(html, "Namespace")
    assert 'class="differs"' not in _row(html, "Environment version")


def test_it_shows_fingerprints_trace_excerpt_and_the_binding_to_sign(client_for, conflict) -> None:
    case = ReviewCase.objects.get(case_id=conflict.case_id)
    binding = decision_prepare(case_id=conflict.case_id)
    html = (
        client_for("reviewer").get(reverse("review:case", args=[conflict.case_id])).content.decode()
    )
    assert case.receipt_fingerprint in html
    assert case.environment["state_fingerprint"] in html
    assert [e["type"] for e in case.trace_excerpt][-1] in html
    assert 'class="event-type mono">intent.proposed<' in html
    for name in ("receipt_fingerprint", "pending_intent_digest", "environment_fingerprint"):
        assert f'<dt>{name}</dt><dd class="mono break">{binding[name]}</dd>' in html
    assert 'name="password"' in html and 'value="replan"' in html and 'value="abort"' in html
    assert 'name="binding" value="' in html


def test_it_is_for_reviewers_and_admins(client_for, conflict) -> None:
    url = reverse("review:case", args=[conflict.case_id])
    assert client_for("admin").get(url).status_code == 200
    assert client_for("operator").get(url).status_code == 403
    assert client_for("reviewer").get(reverse("review:case", args=["case_nope"])).status_code == 404
