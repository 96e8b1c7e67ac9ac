"""Story: an operator subscribes on the Notifications page to "approval waiting" with a webhook
and an e-mail address. A run stops before its high-risk write; the signed webhook reaches a real
loopback receiver (which verifies the signature) and the mail a real SMTP server, both with the
same absolute link. The operator, signed out, follows the link in Chromium: the dashboard asks
them to sign in and then shows that run's approval card (DESIGN.md section 6.10)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from review.models import NotificationDelivery, NotificationEndpoint
from review.notifications.delivery import delivery_attempt
from review.notifications.events import notifications_catch_up
from tests.browser.support import PASSWORD, Story
from tests.helpers.notify_receivers import SmtpInbox, WebhookReceiver, body_text, free_port, webhook_data
from tests.review.notifications.conftest import waiting_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _subscribe(story: Story, *, channel: str, target: str) -> None:
    story.open("/notifications/", f"notifications-{channel}")
    form = story.page.locator("#endpoint-add")
    form.locator("input[name=name]").fill(f"my {channel}")
    form.locator("select[name=channel]").select_option(channel)
    form.locator("input[name=target]").fill(target)
    form.locator("input[name=kinds][value=approval_waiting]").check()
    form.get_by_role("button", name="Add endpoint").click()
    story.page.wait_for_url(f"{story.base_url}/notifications/")


def test_an_approver_follows_the_notified_link_to_the_waiting_approval(
        browser, stack, users, tmp_path, settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATCHET_PUBLIC_BASE_URL = stack.base_url
    inbox = SmtpInbox().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", inbox.port
    receiver = WebhookReceiver(port=free_port())
    receiver.start()
    subscriber = Story(browser, stack.base_url, "notified-approver-subscribes")
    try:
        subscriber.sign_in("operator-ann")
        _subscribe(subscriber, channel="webhook", target=receiver.url)
        _subscribe(subscriber, channel="email", target="operator-ann@example.test")
        subscriber.shot("subscribed")
        webhook = NotificationEndpoint.objects.get(user=users["operator"], channel="webhook")
        row = subscriber.page.locator(f"#endpoint-{webhook.pk}")
        row.get_by_text("Signing secret").click()
        receiver.secret = row.locator("code.secret").inner_text().strip()  # as the receiver's owner copies it
        assert receiver.secret == webhook.secret
    finally:
        subscriber.close()

    started = timezone.now()
    run_id = waiting_run(tmp_path)
    assert notifications_catch_up(since=started) == 1
    for delivery in NotificationDelivery.objects.all():
        assert delivery_attempt(delivery_id=delivery.pk).status == "delivered"
    receiver.stop()
    inbox.stop()

    [hook] = receiver.accepted
    assert receiver.rejected == []
    link = webhook_data(hook)["url"]
    assert link == f"{stack.base_url}/approvals/?run={run_id}", "an absolute link to the waiting approval"
    [mail] = inbox.messages
    assert f"Open: {link}" in body_text(mail)

    approver = Story(browser, stack.base_url, "notified-approver-follows-link")
    try:
        approver.page.goto(link)
        assert "/accounts/login/" in approver.page.url, "the link asks a signed-out approver to sign in"
        approver.page.fill("input[name=username]", "operator-ann")
        approver.page.fill("input[name=password]", PASSWORD)
        approver.page.click("button[type=submit]")
        approver.page.wait_for_url(link)
        approver.shot("approval-from-link")
        card = approver.page.locator(f"#approval-{run_id}")
        assert card.count() == 1
        assert card.get_by_role("button", name="Approve").count() == 1
    finally:
        approver.close()
