"""``manage.py ratchet_roles``: create or update the operator, reviewer and admin groups."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from review.roles import roles_sync
from runtime.errors import RoleSetupError


class Command(BaseCommand):
    help = (
        "Create the dashboard groups operator, reviewer and admin with exactly their permissions "
        "(idempotent; re-running undoes hand edits). Add users to a group in the Django admin."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            roles = roles_sync()
        except RoleSetupError as exc:
            raise CommandError(str(exc)) from None
        for name, perms in roles.items():
            self.stdout.write(f"{name}: {', '.join(perms)}")
