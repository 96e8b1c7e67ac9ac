"""Story: a staff user scoped to one tenant opens the Django admin (N4, DESIGN.md section 6.6).

The admin shows the runtime tables read-only, and now within the same tenant scope as every
dashboard page: another tenant's runs (their stored spec), checkpoints (their full payload),
trace, tokens and high-water marks are neither listed nor opened, and tables whose rows name no
tenant are not offered to scoped staff at all.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from review.scope import scope_set
from runtime.models import Checkpoint, HighWaterMark
from tests.review.rows import build_run

pytestmark = pytest.mark.django_db(databases="__all__")


@pytest.fixture
def acme_admin(personas) -> Client:
    user = personas["admin"]
    user.is_staff = True
    user.save()
    scope_set(user=user, tenant_ids=["acme"])
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def two_tenants(checkpoint_keyring) -> tuple[str, str]:
    build_run(checkpoint_keyring, run_id="run-acme", tenant="acme", events=1)
    build_run(checkpoint_keyring, run_id="run-globex", tenant="globex", events=1)
    return "run-acme", "run-globex"


def test_n4_it_lists_only_the_scoped_tenants_runs_in_the_admin(acme_admin, two_tenants) -> None:
    page = acme_admin.get(reverse("admin:runtime_run_changelist"))

    assert page.status_code == 200
    assert b"run-acme" in page.content and b"run-globex" not in page.content


def test_n4_it_does_not_open_another_tenants_run_or_checkpoint(acme_admin, two_tenants) -> None:
    other = acme_admin.get(reverse("admin:runtime_run_change", args=["run-globex"]))
    assert other.status_code in (302, 404)
    own = acme_admin.get(reverse("admin:runtime_run_change", args=["run-acme"]))
    assert own.status_code == 200

    foreign = Checkpoint.objects.get(run_id="run-globex")
    page = acme_admin.get(reverse("admin:runtime_checkpoint_change", args=[foreign.pk]))
    assert page.status_code in (302, 404)
    listing = acme_admin.get(reverse("admin:runtime_checkpoint_changelist")).content
    assert foreign.digest.encode() not in listing


def test_it_narrows_the_trace_and_the_marks_to_the_scope(acme_admin, two_tenants) -> None:
    trace = acme_admin.get(reverse("admin:runtime_traceevent_changelist")).content
    assert b"run-acme" in trace and b"run-globex" not in trace
    assert HighWaterMark.objects.filter(run_id="run-globex").exists()
    marks = acme_admin.get(reverse("admin:runtime_highwatermark_changelist")).content
    assert b"run-acme" in marks and b"run-globex" not in marks


def test_it_hides_tables_without_a_tenant_from_scoped_staff(acme_admin, two_tenants) -> None:
    assert acme_admin.get(reverse("admin:runtime_attachment_changelist")).status_code == 403
    index = acme_admin.get(reverse("admin:index")).content
    assert b"Attachments" not in index and b"Runs" in index
