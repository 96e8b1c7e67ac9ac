"""Template helpers for the dashboard: digests, UTC timestamps, phase badges, JSON, numbers.

Everything returns escaped HTML built with ``format_html`` and no inline style, so the pages keep
working under a strict Content-Security-Policy.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from review.queries.live import NavCounts
from review.queries.live import nav_counts as live_nav_counts
from runtime.models import Phase

register = template.Library()

_JSON_LIMIT = 20_000
"""Characters of pretty-printed JSON shown before truncating (a payload can be large)."""

_PHASE_LABELS = dict(Phase.choices)


@register.simple_tag
def digest(value: str | None, length: int = 12) -> SafeString | str:
    """``<code class="digest" title="full">sha256:0123456789ab…</code>``; ``—`` when empty.

    Args:
        value: a ``sha256:<hex>`` digest or any long identifier.
        length: characters of the hex part to show.
    """
    if not value:
        return "—"
    prefix, sep, rest = value.partition(":")
    shown = f"{prefix}:{rest[:length]}" if sep and prefix == "sha256" else value[: length + 7]
    if shown == value:
        return format_html('<code class="digest">{}</code>', value)
    return format_html('<code class="digest" title="{}">{}…</code>', value, shown)


def _relative(seconds: float) -> str:
    future = seconds < 0
    seconds = abs(seconds)
    if seconds < 5:
        return "just now"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
        if seconds >= size:
            amount = f"{int(seconds // size)} {unit}"
            return f"in {amount}" if future else f"{amount} ago"
    return "just now"  # pragma: no cover (seconds >= 5 always matches "s")


@register.simple_tag
def utc(value: datetime | None) -> SafeString | str:
    """A UTC timestamp with a relative hint: ``<time datetime=ISO>2026-01-01 12:00:00 UTC</time>
    <span class="rel">(3 min ago)</span>``; ``—`` for ``None``. Relative to render time."""
    if value is None:
        return "—"
    value = value.astimezone(UTC) if timezone.is_aware(value) else value
    iso = value.isoformat()
    shown = value.strftime("%Y-%m-%d %H:%M:%S UTC")
    rel = _relative((timezone.now() - value).total_seconds()) if timezone.is_aware(value) else ""
    return format_html(
        '<time datetime="{}">{}</time> <span class="rel">({})</span>', iso, shown, rel
    )


@register.simple_tag
def phase_badge(phase: str) -> SafeString:
    """A status badge for a run phase (``class="badge phase-<phase>"``)."""
    label = _PHASE_LABELS.get(phase, phase or "unknown")
    css = phase if phase in _PHASE_LABELS else "unknown"
    return format_html('<span class="badge phase-{}">{}</span>', css, label)


@register.simple_tag
def badge(tone: str, label: str, title: str = "") -> SafeString:
    """A generic badge; ``tone`` is ``ok``, ``bad``, ``warn`` or ``neutral``."""
    tone = tone if tone in {"ok", "bad", "warn", "neutral"} else "neutral"
    if title:
        return format_html('<span class="badge tone-{}" title="{}">{}</span>', tone, title, label)
    return format_html('<span class="badge tone-{}">{}</span>', tone, label)


_RISK_TONES = {"low": "neutral", "medium": "warn", "high": "bad"}


@register.simple_tag
def risk_badge(risk: str) -> SafeString:
    """A badge for an action's risk (low / medium / high)."""
    return format_html(
        '<span class="badge tone-{}">{} risk</span>', _RISK_TONES.get(str(risk), "neutral"), risk
    )


@register.filter
def pretty_json(value: Any) -> str:
    """Indented, key-sorted JSON (truncated after 20,000 characters); escape it in the template."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > _JSON_LIMIT:
        return text[:_JSON_LIMIT] + f"\n… ({len(text) - _JSON_LIMIT} more characters)"
    return text


@register.filter
def percent(value: float | None) -> str:
    """``0.9876`` -> ``"98.8 %"``; ``—`` for ``None``."""
    return "—" if value is None else f"{value * 100:.1f} %"


@register.filter
def seconds(value: float | None) -> str:
    """A duration in seconds, human-sized: ``"0.42 s"``, ``"12.3 s"``, ``"4 min 05 s"``."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(round(value)), 60)
    return f"{minutes} min {secs:02d} s"


@register.filter
def as_text(value: Any) -> str:
    """A compared value as one line: strings as they are, JSON for the rest, ``—`` for None."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


@register.simple_tag(takes_context=True)
def nav_counts(context: Any) -> NavCounts:
    """Waiting approvals and open cases of the signed-in user's tenants for the navigation badges
    (bounded; DESIGN.md sections 6.6 and 6.8). Use as ``{% nav_counts as nav %}``."""
    return live_nav_counts(user=context["request"].user)


@register.simple_tag
def copy_button(value: str, label: str = "Copy") -> SafeString | str:
    """A button that copies ``value`` (a long id) to the clipboard (``static/review/live.js``)."""
    if not value:
        return ""
    return format_html(
        '<button type="button" class="copy" data-copy="{}" aria-label="Copy {}">{}</button>',
        value, value, label,
    )
