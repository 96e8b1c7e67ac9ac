"""``manage.py ratchet_roles`` creates the three groups with exactly their permissions."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def _perms(name: str) -> set[str]:
    group = Group.objects.get(name=name)
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in group.permissions.select_related("content_type")
    }


def test_it_creates_the_operator_reviewer_and_admin_groups() -> None:
    out = StringIO()
    call_command("ratchet_roles", stdout=out)
    assert _perms("operator") == {
        "review.view_runs",
        "review.approve_action",
        "review.deny_action",
        "review.refresh_approval",
        "review.amend_action",
        "review.cancel_run",
        "review.restart_run",
    }
    assert _perms("reviewer") == {"review.view_runs", "review.decide_case"}
    admin = _perms("admin")
    assert _perms("operator") | _perms("reviewer") | {"review.view_trace"} <= admin
    assert {"runtime.view_run", "runtime.view_traceevent", "runtime.view_checkpoint"} <= admin
    assert not any(
        p.startswith("runtime.") and not p.split(".")[1].startswith("view_") for p in admin
    )
    assert "operator: " in out.getvalue()


def test_running_it_again_undoes_hand_edits() -> None:
    call_command("ratchet_roles", stdout=StringIO())
    Group.objects.get(name="reviewer").permissions.add(
        Permission.objects.get(codename="view_trace")
    )
    call_command("ratchet_roles", stdout=StringIO())
    assert "review.view_trace" not in _perms("reviewer")
    assert Group.objects.filter(name__in=["operator", "reviewer", "admin"]).count() == 3
