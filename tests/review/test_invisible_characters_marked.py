"""Approvers see invisible characters marked, never acting (DESIGN.md section 2.2).

Story: a commit touching ``invoice\u202etxt.exe`` showed the approver
``invoiceexe.txt``. The ``mark_invisible`` filter replaces every Cc/Cf character with a labelled
mark and never emits the character itself; ``has_invisible`` lets a page add a warning.
"""

from __future__ import annotations

import unicodedata

from django.template import Context, Template

from review.templatetags.ratchet_marks import has_invisible, mark_invisible


def _render(text: str, value: object) -> str:
    return Template("{% load ratchet_marks %}" + text).render(Context({"value": value}))


def test_it_marks_a_bidi_override_in_a_file_name():
    html = _render("{{ value|mark_invisible }}", "invoice\u202etxt.exe")

    assert html == ('invoice<mark class="invisible-char" title="U+202E RIGHT-TO-LEFT OVERRIDE">'
                    "U+202E</mark>txt.exe")
    assert "\u202e" not in html


def test_it_marks_zero_width_and_control_characters_but_keeps_lines_of_a_commit_message():
    message = "Fix totals\n\n\tpaid\u200b \u2066isolated\u2069 \x1b[31m \u0085 \ufeff"

    html = _render("{{ value|mark_invisible }}", message)

    assert "Fix totals\n\n\tpaid" in html
    for code in ("U+200B", "U+2066", "U+2069", "U+001B", "U+0085", "U+FEFF"):
        assert f">{code}</mark>" in html
    assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in html if c not in "\n\t")


def test_it_escapes_html_around_and_inside_the_marks():
    html = _render("{{ value|mark_invisible }}", "<script>\u202e&")

    assert html.startswith("&lt;script&gt;<mark") and html.endswith("</mark>&amp;")
    assert _render("{{ value|mark_invisible }}", "<b>plain</b>") == "&lt;b&gt;plain&lt;/b&gt;"


def test_it_says_whether_a_value_needs_a_warning():
    assert has_invisible("a\u202eb") and has_invisible("a\x00b")
    assert not has_invisible("line one\nline two\tcol") and not has_invisible(None)
    assert _render("{% if value|has_invisible %}warn{% endif %}", "x\u200dy") == "warn"
    assert mark_invisible(None) == ""
