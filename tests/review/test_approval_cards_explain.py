"""An approval card says who asked and which rule made the write wait (DESIGN.md section 6.11)."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from django.urls import reverse

from tests.review.stories import approval_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_card_names_who_asked_and_the_rule(tmp_path: Path, ratchet_keys, client_for) -> None:
    approval_run(tmp_path)

    page = client_for("operator").get(reverse("review:approvals"))

    text = html.unescape(page.content.decode())
    assert page.status_code == 200
    assert "Who asked" in text and "the scripted planner (in process)" in text
    assert "Which rule" in text and "policy story-policy v1 needs an approval for risks: high" in text
