"""The high-water mark store (DESIGN.md section 4, Freshness).

One ``HighWaterMark`` row per ``(task_id, run_id, environment_instance_id)`` holds the committed
generation and the digest of its envelope bytes, outside the checkpoint. It lives on the database
alias ``runtime.database.routers.hwm_alias`` names: a database of its own (``hwm.sqlite3`` in the var dir,
``<name>_hwm`` beside a PostgreSQL one, or ``RATCHET_HWM_DATABASE_URL``; DESIGN.md section 4.2),
so a main database restored from a backup fails closed. Only a compare-and-set
(:func:`hwm_advance`) moves it forward; the commit protocol in ``runtime.checkpoints.protocol`` says when.

Every access fails closed: a missing row, table or database is a
:class:`HighWaterMarkMissingError`, never "generation 0".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    OperationalError,
    ProgrammingError,
    connections,
    transaction,
)
from django.db.models import QuerySet
from django.db.models.functions import Now

from runtime.database.routers import hwm_alias
from runtime.database.statements import compiled_update
from runtime.errors import HighWaterMarkMissingError, MarkStoreUnavailableError, RunExistsError, StaleGenerationError
from runtime.models import HighWaterMark, Run


def _store_error(exc: Exception) -> type[HighWaterMarkMissingError]:
    """An outage (the store did not answer: ``MarkStoreUnavailableError``, the run resumes once it
    does) or a store without its table (``HighWaterMarkMissingError``: a person looks)."""
    if isinstance(exc, OperationalError) and "no such table" not in str(exc).lower():
        return MarkStoreUnavailableError
    return HighWaterMarkMissingError


HWM_STORE_ERRORS = (OperationalError, ProgrammingError)
"""A missing table (ProgrammingError on PostgreSQL, OperationalError on SQLite) or an unreachable
database (OperationalError): the HWM store is missing, so fail closed."""

_STORE_HINT = "; if this is a new install or an upgrade, run `manage.py migrate`"


@dataclass(frozen=True)
class HighWaterMarkInfo:
    """A run's HWM: committed ``generation`` (0 before the first commit) and its ``digest``."""

    generation: int
    digest: str


def _hwm_scope(run: Run) -> dict[str, str]:
    return {
        "task_id": run.task_id,
        "run_id": run.run_id,
        "environment_instance_id": run.environment_instance_id,
    }


def hwm_read(*, run: Run) -> HighWaterMarkInfo:
    """The HWM of ``run`` (its scope comes from the run row's identity columns).

    Inside an open transaction on the HWM alias the read runs in a savepoint, so a missing table
    does not poison the caller's PostgreSQL transaction.

    Raises:
        HighWaterMarkMissingError: the HWM row, table or database is missing.
    """
    alias = hwm_alias()
    query = (
        HighWaterMark.objects.using(alias)
        .filter(**_hwm_scope(run))
        .values("generation", "checkpoint_digest")
    )
    try:
        if transaction.get_connection(alias).in_atomic_block:
            with transaction.atomic(using=alias):
                row = query.first()
        else:
            row = query.first()
    except HWM_STORE_ERRORS as exc:
        raise _store_error(exc)(
            f"the high-water mark store is unavailable ({type(exc).__name__}): failing closed"
            + _STORE_HINT,
            run_id=run.run_id,
            alias=alias,
        ) from None
    if row is None:
        raise HighWaterMarkMissingError(
            run_id=run.run_id,
            task_id=run.task_id,
            environment_instance_id=run.environment_instance_id,
        )
    return HighWaterMarkInfo(generation=row["generation"], digest=row["checkpoint_digest"])


def hwm_advance(*, run: Run, expected: int, generation: int, digest: str) -> None:
    """Compare-and-set the HWM of ``run`` from ``expected`` to ``generation`` with ``digest``.

    It commits here, in the mark store's own transaction, after the main transaction that is
    the commit point (``runtime.checkpoints.transaction``). A mark already at
    exactly ``generation`` and ``digest`` is success: the same commit, completed by a reader
    first (``runtime.checkpoints.mark_completion``).

    Args:
        run: the run row (its identity columns name the HWM scope).
        expected: the generation the caller restored or last committed.
        generation: the new generation (``expected + 1``).
        digest: ``sha256:<hex>`` of the stored envelope bytes of ``generation``.

    Raises:
        StaleGenerationError: the HWM is neither at ``expected`` nor at this commit (another
            commit got there first).
        HighWaterMarkMissingError: the HWM row, table or database is missing; the mark did not
            move (the caller's main transaction may have committed:
            ``runtime.checkpoints.transaction`` says so with ``MarkPendingError``).
    """
    alias = hwm_alias()

    def build(s: Mapping[str, Any]) -> tuple[QuerySet[Any], dict[str, Any]]:
        queryset = HighWaterMark.objects.using(alias).filter(
            task_id=s["task_id"], run_id=s["run_id"],
            environment_instance_id=s["environment_instance_id"], generation=s["expected"])
        return queryset, {"generation": s["generation"], "checkpoint_digest": s["digest"],
                          "updated_at": Now()}

    def cas() -> None:
        # Compiled once per process (runtime.database.statements): the same statement every commit.
        updated = compiled_update(alias=alias, shape=("hwm_cas",), build=build, slots={
            **_hwm_scope(run), "expected": expected, "generation": generation, "digest": digest})
        if updated == 1:
            return
        scope = HighWaterMark.objects.using(alias).filter(**_hwm_scope(run))
        current = scope.values_list("generation", "checkpoint_digest").first()
        if current is None:
            raise HighWaterMarkMissingError(run_id=run.run_id, generation=generation)
        if current == (generation, digest):
            return  # already moved to exactly this commit (runtime.checkpoints.mark_completion got there first)
        raise StaleGenerationError(
            run_id=run.run_id, expected_generation=expected, hwm_generation=current[0]
        )

    try:
        if transaction.get_connection(alias).in_atomic_block:
            with transaction.atomic(using=alias):  # a savepoint in the caller's transaction
                cas()
        else:
            # One round trip (DESIGN.md section 4.13): the compare-and-set is one statement, and
            # in autocommit mode that statement is its own transaction, so no BEGIN and COMMIT
            # travel around it. The reads of the slow path below only explain a rowcount of 0.
            cas()
    except HWM_STORE_ERRORS as exc:
        raise HighWaterMarkMissingError(
            f"the high-water mark store is unavailable ({type(exc).__name__}): the mark did not move",
            run_id=run.run_id,
            alias=alias,
        ) from None


def hwm_create(*, run_id: str, task_id: str, environment_instance_id: str) -> None:
    """Create the HWM row of a new run at generation 0 (no checkpoint committed yet).

    Raises:
        RunExistsError: a high-water mark for this scope already exists.
        HighWaterMarkMissingError: the HWM table or database is missing.
    """
    alias = hwm_alias()
    try:
        with transaction.atomic(using=alias):
            HighWaterMark.objects.using(alias).create(
                task_id=task_id,
                run_id=run_id,
                environment_instance_id=environment_instance_id,
                generation=0,
                checkpoint_digest="",
            )
    except IntegrityError:
        raise RunExistsError(
            "a high-water mark for this run already exists", run_id=run_id
        ) from None
    except HWM_STORE_ERRORS as exc:
        raise _store_error(exc)(
            f"the high-water mark store is unavailable ({type(exc).__name__})" + _STORE_HINT,
            run_id=run_id,
            alias=alias,
        ) from None


def hwm_adopt_from_main() -> int:
    """Move marks a release that kept them in the main database left there into the mark store.

    Run by ``manage.py migrate`` after it migrated the mark store (DESIGN.md section 4.2). A
    mark the store already holds for the same scope wins (it is the authority); every row is
    then deleted from the main database's table, so a later restore of that database cannot
    bring an old mark back through here. Copy first, delete second: a crash in between leaves
    rows that the next ``migrate`` copies (as no-ops) and deletes.

    Returns the number of rows found in the main database (0 when its table does not exist).

    Raises:
        OperationalError / ProgrammingError: either database refused (nothing deleted then).
    """
    alias = hwm_alias()
    table = HighWaterMark._meta.db_table
    if table not in connections[DEFAULT_DB_ALIAS].introspection.table_names():
        return 0
    fields = ("task_id", "run_id", "environment_instance_id", "generation", "checkpoint_digest",
              "updated_at")
    rows = list(HighWaterMark.objects.using(DEFAULT_DB_ALIAS).values("pk", *fields))
    if not rows:
        return 0
    with transaction.atomic(using=alias):
        HighWaterMark.objects.using(alias).bulk_create(
            [HighWaterMark(**{f: row[f] for f in fields}) for row in rows], ignore_conflicts=True)
    # Nothing writes marks to the main database any more, so "up to the largest key copied" is
    # exactly the rows copied, in one statement however many there are.
    HighWaterMark.objects.using(DEFAULT_DB_ALIAS).filter(
        pk__lte=max(row["pk"] for row in rows)).delete()
    return len(rows)
