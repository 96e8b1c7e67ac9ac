"""Dashboard tenant scope (DESIGN.md section 6.6): who sees which tenants, the fail-closed
default, the role-creation defaults, and ``manage.py ratchet_roles --scope``.

The URL-by-URL tenant matrix is in ``test_authorization_matrix.py``."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from review.models import DashboardScope
from review.roles import demo_users_ensure, roles_sync
from review.scope import ALL, scope_filter, scope_set, scope_tenants
from runtime.models import Run
from tests.review.rows import build_run

pytestmark = pytest.mark.django_db


def _reader(django_user_model, name: str = "reader"):  # type: ignore[no-untyped-def]
    """A user holding the read permission directly (no group, so no group scope)."""
    user = django_user_model.objects.create_user(username=name, password="x")
    user.user_permissions.add(Permission.objects.get(content_type__app_label="review",
                                                     codename="view_runs"))
    return user


@pytest.fixture
def two_tenants(checkpoint_keyring, roles) -> None:  # type: ignore[no-untyped-def]
    build_run(checkpoint_keyring, run_id="run-acme", tenant="acme")
    build_run(checkpoint_keyring, run_id="run-globex", tenant="globex")


def test_it_shows_nothing_to_a_user_without_a_scope_row(two_tenants, django_user_model) -> None:
    user = _reader(django_user_model)
    assert scope_tenants(user=user) == frozenset()
    assert list(scope_filter(user=user, queryset=Run.objects.all())) == []
    client = Client()
    client.force_login(user)
    assert client.get(reverse("review:run", args=["run-acme"])).status_code == 404
    assert "run-acme" not in client.get(reverse("review:runs")).content.decode()


def test_it_shows_every_tenant_to_a_superuser(two_tenants, django_user_model) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.org", "x")
    assert scope_tenants(user=root) is ALL
    assert scope_filter(user=root, queryset=Run.objects.all()).count() == 2


def test_it_lets_a_users_own_row_narrow_what_their_group_sees(two_tenants,
                                                              django_user_model) -> None:
    user = django_user_model.objects.create_user(username="alice", password="x")
    user.groups.add(Group.objects.get(name="operator"))
    assert scope_tenants(user=user) is ALL, "roles_sync gave the new group every tenant"
    scope_set(user=user, tenant_ids=["acme", " ", "acme"])
    assert scope_tenants(user=user) == frozenset({"acme"})
    assert DashboardScope.objects.get(user=user).tenant_ids == ["acme"]


def test_it_unions_the_rows_of_a_users_groups(two_tenants, django_user_model) -> None:
    user = _reader(django_user_model)
    for name, tenant in (("acme-team", "acme"), ("globex-team", "globex")):
        group = Group.objects.create(name=name)
        scope_set(group=group, tenant_ids=[tenant])
        user.groups.add(group)
    assert scope_tenants(user=user) == frozenset({"acme", "globex"})


def test_it_refuses_a_row_for_both_or_neither_user_and_group(django_user_model, roles) -> None:
    with pytest.raises(ValueError):
        scope_set(tenant_ids=["acme"])
    with pytest.raises(ValueError):
        scope_set(user=_reader(django_user_model), group=Group.objects.get(name="operator"),
                  tenant_ids=["acme"])


def test_it_fails_closed_for_groups_the_command_creates(db) -> None:
    call_command("ratchet_roles", stdout=StringIO())
    assert not DashboardScope.objects.exists(), "production groups see no tenant until scoped"


def test_it_opens_groups_created_by_roles_sync_and_keeps_later_edits(db) -> None:
    roles_sync()
    assert DashboardScope.objects.filter(group__isnull=False, all_tenants=True).count() == 3
    DashboardScope.objects.filter(group__name="operator").delete()
    roles_sync()
    assert not DashboardScope.objects.filter(group__name="operator").exists(), (
        "a re-run never re-opens a group whose scope was removed")


def test_it_gives_the_demo_accounts_every_tenant(db) -> None:
    call_command("ratchet_roles", stdout=StringIO())  # groups without scope rows
    demo_users_ensure(password="demo-pass")
    rows = DashboardScope.objects.filter(user__username__in=["operator", "reviewer", "admin"])
    assert sorted(r.user.username for r in rows if r.all_tenants) == ["admin", "operator",
                                                                      "reviewer"]


def test_it_sets_and_removes_a_scope_from_the_command_line(two_tenants,
                                                           django_user_model) -> None:
    user = _reader(django_user_model, "bob")
    out = StringIO()
    call_command("ratchet_roles", "--scope", "bob", "acme", "initech", stdout=out)
    assert "user bob: acme, initech" in out.getvalue()
    assert scope_tenants(user=django_user_model.objects.get(pk=user.pk)) == frozenset(
        {"acme", "initech"})
    call_command("ratchet_roles", "--scope", "reviewer", "--group", "--all-tenants",
                 stdout=StringIO())
    assert DashboardScope.objects.get(group__name="reviewer").all_tenants
    call_command("ratchet_roles", "--unscope", "bob", stdout=StringIO())
    assert scope_tenants(user=django_user_model.objects.get(pk=user.pk)) == frozenset()
    with pytest.raises(CommandError, match="no user named"):
        call_command("ratchet_roles", "--scope", "nobody", "acme", stdout=StringIO())
    with pytest.raises(CommandError, match="at least one tenant"):
        call_command("ratchet_roles", "--scope", "bob", stdout=StringIO())


def test_it_edits_a_scope_in_the_django_admin(two_tenants, django_user_model) -> None:
    root = django_user_model.objects.create_superuser("root", "root@example.org", "x")
    user = _reader(django_user_model, "carol")
    client = Client()
    client.force_login(root)
    response = client.post(reverse("admin:review_dashboardscope_add"),
                           {"user": user.pk, "group": "", "tenants": "globex\nacme\n\nacme"})
    assert response.status_code == 302, response.content[:500]
    assert DashboardScope.objects.get(user=user).tenant_ids == ["acme", "globex"]
    both = client.post(reverse("admin:review_dashboardscope_add"),
                       {"user": user.pk, "group": Group.objects.get(name="operator").pk,
                        "tenants": "acme"})
    assert b"exactly one" in both.content
