"""``manage.py demo --reset``: delete what the demo seeded, and only that, so it can seed again.

What the demo made is known exactly: the run ids in ``<workdir>/seeded.json`` and everything under
its own directory (``var/demo``: task specs, replay targets, the workspace, the ledger and orders
databases, the services' ports and token). A reset deletes those runs' rows -- checkpoints, trace,
receipts ledger, idempotency records, review cases, high-water marks -- and that directory.
Nothing else is touched: other runs, the keys, the database file itself, the logins. Run rows are
normally never deleted (they are the evidence); these are demo runs the demo itself created.
Stop a running demo first: a reset does not wait for a worker that still drives a run.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.db import transaction
from django.db.models import ProtectedError

from runtime.database.routers import hwm_alias
from runtime.errors import DemoSetupError
from runtime.models import HighWaterMark, RecoveryWatch, Run

log = logging.getLogger("runtime.demo")

MARKER = "seeded.json"


@dataclass(frozen=True)
class DemoReset:
    """What :func:`demo_reset` removed: ``runs`` deleted run ids; ``directory`` whether the demo's
    directory existed and was removed."""

    runs: list[str]
    directory: bool


def _seeded_ids(workdir: Path) -> list[str]:
    try:
        runs = json.loads((workdir / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(runs, dict):
        return []
    return sorted({v for v in runs.values() if isinstance(v, str) and v})


def _rows_delete(run_ids: list[str]) -> None:
    """Delete every row that refers to ``run_ids``, then the runs, in one transaction.

    Relations are found from the model graph (``Run._meta.related_objects``), so a table another
    part of the runtime adds later is covered; one protected by a relation not yet deleted is
    tried again after the others.
    """
    relations = [rel for rel in Run._meta.related_objects if rel.field is not None]
    with transaction.atomic():
        pending = list(relations)
        for _ in range(len(relations) + 1):
            blocked = []
            for rel in pending:
                try:
                    with transaction.atomic():
                        rel.related_model._base_manager.filter(**{f"{rel.field.name}__in": run_ids}).delete()
                except ProtectedError:
                    blocked.append(rel)
            if not blocked:
                break
            pending = blocked
        RecoveryWatch.objects.filter(run_id__in=run_ids).delete()
        Run.objects.filter(run_id__in=run_ids).delete()
    HighWaterMark.objects.using(hwm_alias()).filter(run_id__in=run_ids).delete()


def demo_reset(*, workdir: Path) -> DemoReset:
    """Delete the runs the demo seeded (from ``<workdir>/seeded.json``) and ``workdir`` itself.

    Args:
        workdir: the demo's directory (``var/demo``).

    Returns:
        :class:`DemoReset`: which runs were deleted and whether the directory was removed.

    Raises:
        DemoSetupError: a seeded run's rows could not be deleted (a row protects them); nothing
            was deleted in the database and the directory was kept.
    """
    run_ids = [r for r in _seeded_ids(workdir) if Run.objects.filter(run_id=r).exists()]
    if run_ids:
        try:
            _rows_delete(run_ids)
        except ProtectedError as exc:
            raise DemoSetupError(f"the demo's runs cannot be deleted: {type(exc).__name__}; "
                                 "delete var/ by hand to start over") from None
    existed = workdir.exists()
    if existed:
        shutil.rmtree(workdir)
    log.info("demo: reset removed %d runs and %s", len(run_ids), workdir.name)
    return DemoReset(runs=run_ids, directory=existed)
