"""Story: a reviewer wants frozen runs and new cases by e-mail; an operator's team channel takes
"approval waiting" through an apprise URL (here apprise's generic JSON target on a loopback
server). The mail reaches a real SMTP server with an absolute link; apprise's POST arrives."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any

import pytest
from django.utils import timezone

from review.models import DeliveryStatus, NotificationDelivery
from review.notifications.delivery import delivery_attempt
from review.notifications.events import notifications_catch_up
from review.notifications.subscriptions import endpoint_create
from tests.helpers.notify_receivers import body_text, free_port
from tests.review.notifications.conftest import PUBLIC, waiting_run
from tests.review.stories import conflict_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_mails_an_open_case_with_an_absolute_link(tmp_path, ratchet_keys, personas, inbox) -> None:  # type: ignore[no-untyped-def]
    started = timezone.now()
    conflict = conflict_run(tmp_path)
    endpoint_create(name="mail", channel="email", target="reviewer@example.test",
                    kinds=["case_opened", "run_frozen"], user=personas["reviewer"])
    assert notifications_catch_up(since=started) == 1
    delivery = NotificationDelivery.objects.get()
    assert delivery_attempt(delivery_id=delivery.pk).status == DeliveryStatus.DELIVERED
    [mail] = inbox.messages
    assert mail["To"] == "reviewer@example.test"
    assert "Review case opened" in mail["Subject"] and conflict.run_id in mail["Subject"]
    assert f"Open: {PUBLIC}/cases/{conflict.case_id}/" in body_text(mail)


def test_it_sends_through_an_apprise_url(tmp_path, ratchet_keys, personas) -> None:  # type: ignore[no-untyped-def]
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        started = timezone.now()
        run_id = waiting_run(tmp_path)
        endpoint_create(name="team", channel="apprise", target=f"json://127.0.0.1:{server.server_port}/",
                        kinds=["approval_waiting"], group=personas["operator"].groups.get())
        notifications_catch_up(since=started)
        delivery = NotificationDelivery.objects.get()
        assert delivery_attempt(delivery_id=delivery.pk).status == DeliveryStatus.DELIVERED
    finally:
        server.shutdown()
        server.server_close()
    [message] = received
    assert run_id in message["title"]
    assert f"{PUBLIC}/approvals/?run={run_id}" in message["message"]
