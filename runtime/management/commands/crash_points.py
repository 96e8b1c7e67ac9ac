"""``manage.py crash_points``: list every named crash point (arm one with RATCHET_CRASH_AT)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "List the named crash points; RATCHET_CRASH_AT=<point>[:<nth>] makes a process SIGKILL itself there."

    def handle(self, *args: Any, **options: Any) -> None:
        import runtime.adapters.git.adapter  # noqa: F401  (modules register their points on import)
        import runtime.adapters.workspace.adapter  # noqa: F401
        import runtime.checkpoints.protocol  # noqa: F401
        import runtime.engine  # noqa: F401
        import runtime.planners.chat_tools.planner  # noqa: F401
        from runtime.core.crashpoints import CRASH_POINTS

        for name, description in sorted(CRASH_POINTS.items()):
            self.stdout.write(f"{name:36} {description}")
