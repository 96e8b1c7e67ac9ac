"""Pages that stay true (DESIGN.md section 6.8): lists poll with a token, answer 204 while
nothing changed and swap their table, the badges and an announcement when something did; the
step timeline groups a page of trace events."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.urls import reverse

from review.queries.steps import step_timeline
from tests.review.stories import approval_run

pytestmark = pytest.mark.django_db(transaction=True)


def _token(html: str) -> str:
    return re.search(r'<div id="poller"[^>]*"since": "([0-9a-f]+)"', html).group(1)


def test_it_shows_a_new_waiting_approval_in_the_queue_and_the_badge(
    client_for, tmp_path, ratchet_keys, enqueued
) -> None:
    client = client_for("operator")
    page = client.get(reverse("review:approvals")).content.decode()
    assert re.search(r'id="nav-approvals-count" class="nav-count is-zero"', page)
    token = _token(page)
    poll = client.get(reverse("review:approvals"), {"since": token}, headers={"HX-Request": "true"})
    assert poll.status_code == 204
    run_id = approval_run(tmp_path)
    poll = client.get(reverse("review:approvals"), {"since": token},
                      headers={"HX-Request": "true"}).content.decode()
    assert re.search(r'<section id="approvals"[^>]*hx-swap-oob="true"', poll)
    assert f'id="approval-{run_id}"' in poll
    assert re.search(r'id="nav-approvals-count" class="nav-count" hx-swap-oob="true"><span '
                     r'aria-hidden="true">1<', poll)
    assert "Approvals queue updated: 1 waiting." in poll


def test_the_cases_list_polls_like_the_others(client_for, personas) -> None:
    client = client_for("reviewer")
    token = _token(client.get(reverse("review:cases")).content.decode())
    assert client.get(reverse("review:cases"), {"since": token},
                      headers={"HX-Request": "true"}).status_code == 204
    changed = client.get(reverse("review:cases"), {"since": "stale"},
                         headers={"HX-Request": "true"}).content.decode()
    assert re.search(r'<section id="cases"[^>]*hx-swap-oob="true"', changed)


def test_it_groups_trace_events_into_steps_with_durations_and_folds_bookkeeping() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    kinds = ["lease.acquired", "run.started", "intent.proposed", "approval.granted",
             "write.executed", "checkpoint.committed", "lease.released", "intent.proposed",
             "write.executed"]
    events = [SimpleNamespace(seq=i + 1, event_type=t, payload={"action": {"kind": "commit"}},
                              created_at=start + timedelta(seconds=i)) for i, t in enumerate(kinds)]
    steps = step_timeline(events=list(reversed(events)))
    assert [s.number for s in steps] == [2, 1, 0], "newest step first"
    first = steps[1]
    assert first.path == "intent → approval → execute + receipt → checkpoint"
    assert first.duration_seconds == 4.0 and [s.event.event_type for s in first.folded] == [
        "lease.released"]
    assert [s.offset_seconds for s in first.main_stages] == [0.0, 1.0, 2.0, 3.0]
    assert all(0 <= s.start < 20 and 1 <= s.width <= 20 for s in first.stages)
