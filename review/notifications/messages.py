"""What a notification says: a title, a plain-text body and the webhook's JSON, each with an
absolute link built on ``RATCHET_PUBLIC_BASE_URL`` (DESIGN.md section 6.10).

The JSON follows the Standard Webhooks payload shape: ``{"type", "timestamp", "data"}``. It
carries identifiers, the summary and the link, never a diff, an argument or a secret: the
receiver follows the link, and the dashboard checks who opens it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

from review.models import NotificationEvent, NotificationKind


@dataclass(frozen=True)
class Message:
    """One rendered notification: ``title`` (subject line), ``text`` (body), ``body`` (JSON text)."""

    title: str
    text: str
    body: str
    url: str


def absolute_url(path: str) -> str:
    """``path`` (starting with ``/``) on the configured public base URL."""
    return settings.RATCHET_PUBLIC_BASE_URL.rstrip("/") + path


def message_render(*, event: NotificationEvent) -> Message:
    """The message for ``event``; the same bytes for every attempt of a delivery."""
    url = absolute_url(event.path)
    label = NotificationKind(event.kind).label
    title = f"[Ratchet] {label}: run {event.run_id} ({event.tenant_id}/{event.task_id})"
    lines = [f"{label} for run {event.run_id}", f"tenant {event.tenant_id}, task {event.task_id}"]
    if event.case_id:
        lines.append(f"review case {event.case_id}")
    if event.summary:
        lines.append(event.summary)
    lines += ["", f"Open: {url}"]
    data = {"event_id": event.pk, "run_id": event.run_id, "tenant_id": event.tenant_id, "task_id": event.task_id,
            "case_id": event.case_id or None, "summary": event.summary, "url": url}
    body = json.dumps({"type": f"ratchet.{event.kind}", "timestamp": event.created_at.isoformat(), "data": data},
                      sort_keys=True, separators=(",", ":"))
    return Message(title=title, text="\n".join(lines) + "\n", body=body, url=url)
