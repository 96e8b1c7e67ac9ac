"""``manage.py ratchet_roles``: create or update the operator, reviewer and admin groups, and
set which tenants a user or a group may see on the dashboard (DESIGN.md section 6.6).

    manage.py ratchet_roles                          # groups and permissions (idempotent)
    manage.py ratchet_roles --scope alice acme globex
    manage.py ratchet_roles --scope operator --group --all-tenants
    manage.py ratchet_roles --unscope alice          # alice falls back to her groups
    manage.py ratchet_roles --show-scopes
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser

from review.models import DashboardScope
from review.roles import roles_sync
from review.scope import scope_clear, scope_set
from runtime.errors import RoleSetupError


class Command(BaseCommand):
    help = (
        "Create the dashboard groups operator, reviewer and admin with exactly their permissions "
        "(idempotent; re-running undoes hand edits). Add users to a group in the Django admin. "
        "--scope NAME TENANT... sets the tenants a user (or, with --group, a group) may see; "
        "a user with no scope sees nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--scope", nargs="+", metavar=("NAME", "TENANT"),
                            help="user (or group, with --group) then the tenant ids it may see")
        parser.add_argument("--all-tenants", action="store_true",
                            help="with --scope NAME: every tenant")
        parser.add_argument("--unscope", metavar="NAME",
                            help="delete the scope of a user (or group, with --group)")
        parser.add_argument("--group", action="store_true",
                            help="NAME in --scope/--unscope is a group, not a username")
        parser.add_argument("--new-groups-see-all-tenants", action="store_true",
                            help="groups this run creates get an all-tenants scope (one-tenant "
                                 "installs); by default they get none (fail closed)")
        parser.add_argument("--show-scopes", action="store_true", help="list every scope row")

    def _holder(self, name: str, *, group: bool) -> dict[str, Any]:
        if group:
            found = Group.objects.filter(name=name).first()
            if found is None:
                raise CommandError(f"no group named {name!r}; run ratchet_roles first")
            return {"group": found}
        users = get_user_model()
        found_user = users.objects.filter(**{users.USERNAME_FIELD: name}).first()
        if found_user is None:
            raise CommandError(f"no user named {name!r}; create the account first")
        return {"user": found_user}

    def handle(self, *args: Any, **options: Any) -> None:
        if options["scope"]:
            name, *tenants = options["scope"]
            if not tenants and not options["all_tenants"]:
                raise CommandError("name at least one tenant, or give --all-tenants")
            row = scope_set(**self._holder(name, group=options["group"]), tenant_ids=tenants,
                            all_tenants=options["all_tenants"])
            self.stdout.write(f"scope: {row}")
            return
        if options["unscope"]:
            deleted = scope_clear(**self._holder(options["unscope"], group=options["group"]))
            self.stdout.write(f"scope removed: {options['unscope']} ({deleted} row)")
            return
        if options["show_scopes"]:
            for row in DashboardScope.objects.select_related("user", "group").order_by("id"):
                self.stdout.write(f"scope: {row}")
            return
        try:
            roles = roles_sync(all_tenants_for_new_groups=options["new_groups_see_all_tenants"])
        except RoleSetupError as exc:
            raise CommandError(str(exc)) from None
        for name, perms in roles.items():
            self.stdout.write(f"{name}: {', '.join(perms)}")
