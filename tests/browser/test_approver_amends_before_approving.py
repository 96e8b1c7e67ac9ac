"""Story: a run stops before its high-risk write; the signed webhook reaches a real loopback receiver
with an absolute link. The operator follows it in Chromium, opens Amend from the approval card,
changes the file content, previews the amended dry-run diff, and confirms. The live worker then
executes the amended write exactly once: the workspace holds the amended content and the adapter
one receipt for the key, under the amended intent (DESIGN.md sections 6.10 and 6.13)."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from review.models import NotificationDelivery
from review.notifications.delivery import delivery_attempt
from review.notifications.events import notifications_catch_up
from review.notifications.subscriptions import endpoint_create
from runtime.adapters.factory import open_adapter
from runtime.decisions.approvals import approvals_waiting
from runtime.models import TraceEvent
from tests.browser.support import PASSWORD, Story
from tests.helpers.notify_receivers import WebhookReceiver, free_port, webhook_data
from tests.review.notifications.conftest import waiting_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AMENDED = "max_orders = 2\nmax_refunds = 1\n"


def test_an_approver_follows_the_link_amends_the_write_and_it_runs_amended_once(
        browser, stack, users, tmp_path, settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATCHET_PUBLIC_BASE_URL = stack.base_url
    receiver = WebhookReceiver(port=free_port())
    receiver.start()
    endpoint = endpoint_create(name="my webhook", channel="webhook", target=receiver.url,
                               kinds=["approval_waiting"], user=users["operator"])
    receiver.secret = endpoint.secret
    started = timezone.now()
    run_id = waiting_run(tmp_path)
    [item] = approvals_waiting(run_ids=[run_id])
    assert notifications_catch_up(since=started) == 1
    [delivery] = NotificationDelivery.objects.all()
    assert delivery_attempt(delivery_id=delivery.pk).status == "delivered"
    receiver.stop()
    [hook] = receiver.accepted
    link = webhook_data(hook)["url"]
    assert link == f"{stack.base_url}/approvals/?run={run_id}", "an absolute link to the waiting approval"

    approver = Story(browser, stack.base_url, "approver-amends")
    try:
        page = approver.page
        page.goto(link)
        assert "/accounts/login/" in page.url, "the link asks a signed-out approver to sign in"
        page.fill("input[name=username]", "operator-ann")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(link)
        page.locator(f"#approval-{run_id}").get_by_role("link", name="Amend").click()
        page.wait_for_url(f"{stack.base_url}/approvals/{run_id}/amend/")
        approver.shot("amend-page")
        arguments = json.loads(page.locator("#amend-arguments").input_value())
        assert arguments["path"] == "limits.toml" and "max_orders = 3" in arguments["content"]
        page.locator("#amend-arguments").fill(json.dumps({**arguments, "content": AMENDED}, indent=2))
        page.locator("#amend-note").fill("finance caps orders at 2")
        page.get_by_role("button", name="Preview the amended diff").click()
        page.locator("#amend-diff").wait_for()
        approver.shot("amended-diff")
        diff = page.locator("#amend-diff").inner_text()
        assert "+max_orders = 2" in diff and "max_orders = 3" not in diff, "the amended content, not the proposed"
        page.get_by_role("button", name="Amend and approve").click()
        page.wait_for_url(f"{stack.base_url}/runs/{run_id}/")
        assert any("Amended and approved by operator-ann" in m for m in approver.messages())
        assert approver.wait_for_phase(run_id, {"completed", "failed", "needs_review"}) == "completed"
        approver.shot("run-completed")
    finally:
        approver.close()

    assert (tmp_path / "ws" / "limits.toml").read_text() == AMENDED
    receipts = [r for r in open_adapter("workspace", tmp_path / "ws").receipts()
                if r.idempotency_key == item.idempotency_key]
    [amended] = TraceEvent.objects.filter(run_id=run_id, event_type="intent.amended").values_list("payload", flat=True)
    assert [r.intent_digest for r in receipts] == [amended["intent_digest"]], "one effect, the amended intent"
    assert amended["superseded"]["intent_digest"] == item.intent_digest != amended["intent_digest"]
    assert amended["approver"] == "operator-ann" and amended["note"] == "finance caps orders at 2"
    executed = TraceEvent.objects.filter(run_id=run_id, event_type="write.executed").values_list("payload", flat=True)
    assert [p["idempotency_key"] for p in executed].count(item.idempotency_key) == 1
