"""Real loopback receivers for the notification stories: a webhook server that verifies the
Standard Webhooks signature as a real receiver would, and an SMTP server (aiosmtpd) that keeps
the mail it accepts. Both listen on 127.0.0.1 and are stopped by the test that started them."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller
from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until(predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "a condition") -> Any:
    """Poll ``predicate`` until it returns something truthy (returned), or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class WebhookReceiver:
    """A webhook endpoint on ``port``: 204 for a request whose signature verifies with ``secret``
    (kept in ``accepted``), 401 otherwise (kept in ``rejected``). ``start`` and ``stop`` may be
    called again, so a test can take the receiver down and bring it back on the same port."""

    port: int
    secret: str = ""
    accepted: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/ratchet"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                try:
                    payload = Webhook(receiver.secret).verify(body, headers)
                except WebhookVerificationError as exc:
                    receiver.rejected.append(str(exc))
                    self.send_response(401)
                    self.end_headers()
                    return
                receiver.accepted.append({"payload": payload, "headers": headers, "body": body})
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep the test output quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd's hook name
        self.messages.append(message_from_bytes(envelope.original_content or envelope.content))
        return "250 Message accepted for delivery"


class SmtpInbox:
    """A real SMTP server on 127.0.0.1 (aiosmtpd); ``messages`` holds what it accepted."""

    def __init__(self) -> None:
        self.port = free_port()
        self._inbox = _Inbox()
        self._controller = Controller(self._inbox, hostname="127.0.0.1", port=self.port)

    @property
    def messages(self) -> list[Message]:
        return self._inbox.messages

    def start(self) -> SmtpInbox:
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()


def body_text(message: Message) -> str:
    """The plain-text body of an e-mail message."""
    part = message.get_payload(decode=True)
    return part.decode("utf-8") if isinstance(part, bytes) else str(message.get_payload())


def webhook_data(received: dict[str, Any]) -> dict[str, Any]:
    """The ``data`` object of a received webhook's JSON body."""
    return json.loads(received["body"])["data"]
