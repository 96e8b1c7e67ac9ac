"""Template filters that show approvers invisible characters instead of letting them act.

A file name or commit message holding U+202E RIGHT-TO-LEFT OVERRIDE reads ``invoice_txt.exe`` as
``invoice_exe.txt``; a zero-width space makes two different names look equal. Wherever the
dashboard shows a name or message an approver or reviewer decides on, ``|mark_invisible``
replaces every character of Unicode category Cc or Cf (the same set the task-spec loader
refuses in paths, ``runtime.taskspec.paths.invisible_characters``) by a visible, labelled
``<mark>``; the character itself is never emitted, so it cannot reorder the page. Newlines and
tabs stay as they are (commit messages have lines). DESIGN.md section 2.2.

Usage::

    {% load ratchet_marks %}
    {{ change.path|mark_invisible }}
    {% if commit.message|has_invisible %}<p class="warning">...</p>{% endif %}
"""

from __future__ import annotations

import unicodedata
from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from runtime.taskspec.paths import INVISIBLE_CATEGORIES

register = template.Library()

_KEPT = frozenset("\n\t")
"""Control characters that are layout, not disguise, in a commit message."""


def _invisible(char: str) -> bool:
    return char not in _KEPT and unicodedata.category(char) in INVISIBLE_CATEGORIES


@register.filter(is_safe=False)
def mark_invisible(value: Any) -> SafeString:
    """``value`` HTML-escaped, each invisible character replaced by a labelled mark.

    Each Cc/Cf character (but newline and tab) becomes
    ``<mark class="invisible-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">U+202E</mark>``.

    Args:
        value: any value; ``None`` renders as the empty string, others through ``str()``.

    Returns:
        Safe HTML with no invisible character left in it.
    """
    text = "" if value is None else str(value)
    if not any(_invisible(char) for char in text):
        return conditional_escape(text)
    parts: list[str] = []
    for char in text:
        if _invisible(char):
            code = f"U+{ord(char):04X}"
            name = unicodedata.name(char, "control character")
            parts.append(format_html('<mark class="invisible-char" title="{} {}">{}</mark>',
                                     code, name, code))
        else:
            parts.append(conditional_escape(char))
    return mark_safe("".join(parts))  # every part above is escaped or built by format_html


@register.filter
def has_invisible(value: Any) -> bool:
    """Whether ``value`` (as text) holds an invisible character (Cc/Cf but newline and tab)."""
    return value is not None and any(_invisible(char) for char in str(value))
