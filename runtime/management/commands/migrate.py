"""``manage.py migrate``: Django's own, which without ``--database`` migrates the main database
and then the high-water mark store (DESIGN.md section 4.2), so one command sets up both."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import DEFAULT_DB_ALIAS

from runtime.checkpoints.high_water_marks import hwm_adopt_from_main
from runtime.database.routers import hwm_alias


class Command(DjangoMigrate):
    help = (DjangoMigrate.help + " Without --database: the main database, then the high-water "
            "mark store (which takes over any marks the main database still holds).")

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        # None means "not named": Django's own callers (test database creation) always name
        # one, and must migrate only that one while the other alias still points elsewhere.
        parser.set_defaults(database=None)

    def get_check_kwargs(self, options: dict[str, Any]) -> dict[str, Any]:
        kwargs = super().get_check_kwargs(options)
        if options["database"] is None:
            kwargs["databases"] = sorted({DEFAULT_DB_ALIAS, hwm_alias()})
        return kwargs

    def handle(self, *args: Any, **options: Any) -> None:
        if options["database"] is not None:
            super().handle(*args, **options)
            return
        super().handle(*args, **{**options, "database": DEFAULT_DB_ALIAS})
        store = hwm_alias()
        if options["verbosity"] >= 1:
            self.stdout.write(self.style.MIGRATE_HEADING(f"High-water mark store ({store}):"))
        super().handle(*args, **{**options, "database": store})
        if options.get("plan") or options.get("check_unapplied"):
            return  # a dry run: move nothing
        moved = hwm_adopt_from_main()
        if moved and options["verbosity"] >= 1:
            self.stdout.write(f"  moved {moved} high-water mark(s) from the main database into the store")
