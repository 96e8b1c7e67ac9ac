"""Signed webhook bodies, as the Standard Webhooks specification does it (DESIGN.md section 6.10).

Each endpoint has its own secret (``whsec_`` + base64 of 32 random bytes). A request carries
``webhook-id`` (stable across retries of one delivery, so a receiver can drop duplicates),
``webhook-timestamp`` (seconds since the epoch, fresh on every attempt, so a receiver can refuse
replays) and ``webhook-signature`` (``v1,`` + base64 HMAC-SHA256 over ``id.timestamp.body``).
The ``standardwebhooks`` library computes and verifies them; receivers can use the same library.
"""

from __future__ import annotations

import base64
import secrets
from datetime import datetime

from standardwebhooks.webhooks import Webhook

SECRET_PREFIX = "whsec_"


def webhook_secret_new() -> str:
    """A fresh endpoint secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def webhook_headers(*, secret: str, message_id: str, sent_at: datetime, body: str) -> dict[str, str]:
    """The three signature headers for ``body`` sent at ``sent_at`` (an aware datetime).

    Args:
        secret: the endpoint's ``whsec_`` secret (never logged).
        message_id: the delivery's stable id.
        sent_at: when this attempt is sent; receivers compare it with their clock.
        body: the exact request body (UTF-8 JSON text) that is signed and sent.
    """
    signature = Webhook(secret).sign(message_id, sent_at, body)
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(sent_at.timestamp())),
        "webhook-signature": signature,
    }
