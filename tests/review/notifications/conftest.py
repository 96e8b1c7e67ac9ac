"""Notification stories: real runs waiting for people, real loopback receivers, fast backoff.

``receiver`` is a signature-checking webhook server (not started: a story starts it, or leaves it
down); ``inbox`` a running aiosmtpd server that Django's mail is pointed at; links are built on
``https://ratchet.example.test`` so a story can tell an absolute link from a relative one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from tests.factories import write_scripted_task
from tests.helpers.notify_receivers import SmtpInbox, WebhookReceiver, free_port
from tests.review.stories import APPROVAL_STEPS

PUBLIC = "https://ratchet.example.test"


@pytest.fixture(autouse=True)
def _notify_settings(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RATCHET_PUBLIC_BASE_URL = PUBLIC
    settings.RATCHET_NOTIFY_BACKOFF_SECONDS = 0.2
    settings.RATCHET_NOTIFY_MAX_ATTEMPTS = 4
    settings.RATCHET_NOTIFY_TIMEOUT_SECONDS = 5.0


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    hook = WebhookReceiver(port=free_port())
    yield hook
    hook.stop()


@pytest.fixture
def inbox(settings) -> Iterator[SmtpInbox]:  # type: ignore[no-untyped-def]
    server = SmtpInbox().start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    yield server
    server.stop()


def waiting_run(directory: Path, *, tenant: str = "default") -> str:
    """A real run of ``tenant`` stopped in ``awaiting_approval`` before its high-risk write."""
    spec = write_scripted_task(directory, steps=APPROVAL_STEPS, approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker="story-worker", tenant_id=tenant)
    assert run_advance(run_id=run_id, worker="story-worker").phase == "awaiting_approval"
    return run_id
