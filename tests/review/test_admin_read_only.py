"""The Django admin stays read-only for runtime tables, even for a superuser."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.test import Client, RequestFactory
from django.urls import reverse

from runtime.models import Run
from tests.review.rows import build_run


@pytest.fixture
def superuser_client(django_user_model) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "x"))
    return client


def test_every_runtime_model_is_registered_and_read_only(django_user_model, db) -> None:
    request = RequestFactory().get("/admin/")
    request.user = django_user_model(
        username="root", is_superuser=True, is_staff=True, is_active=True
    )
    for model in apps.get_app_config("runtime").get_models():
        model_admin = admin.site._registry[model]
        assert model_admin.has_view_permission(request), model.__name__
        assert not model_admin.has_add_permission(request), model.__name__
        assert not model_admin.has_change_permission(request), model.__name__
        assert not model_admin.has_delete_permission(request), model.__name__


def test_a_superuser_can_look_but_not_change(superuser_client, checkpoint_keyring) -> None:
    build_run(checkpoint_keyring, run_id="run-admin", events=2)
    assert superuser_client.get(reverse("admin:runtime_run_changelist")).status_code == 200
    change_url = reverse("admin:runtime_run_change", args=["run-admin"])
    page = superuser_client.get(change_url)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert superuser_client.post(change_url, {"phase": "completed"}).status_code == 403
    assert superuser_client.get(reverse("admin:runtime_run_add")).status_code == 403
    assert (
        superuser_client.post(
            reverse("admin:runtime_run_delete", args=["run-admin"]), {"post": "yes"}
        ).status_code
        == 403
    )
    assert Run.objects.get(run_id="run-admin").phase == "running"
    checkpoint = reverse("admin:runtime_checkpoint_changelist")
    assert superuser_client.get(checkpoint).status_code == 200


def test_the_admin_role_reads_runtime_tables_in_the_admin(personas, checkpoint_keyring) -> None:
    build_run(checkpoint_keyring, run_id="run-admin", events=1)
    admin_user = personas["admin"]
    admin_user.is_staff = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    assert client.get(reverse("admin:runtime_traceevent_changelist")).status_code == 200
    operator = personas["operator"]
    operator.is_staff = True
    operator.save()
    client.force_login(operator)
    assert client.get(reverse("admin:runtime_traceevent_changelist")).status_code == 403
