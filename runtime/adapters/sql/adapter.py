"""SQL adapter: named, parameterized statements applied to a SQLite or PostgreSQL database.

DESIGN.md section 5.11. A run never sends SQL a model wrote: an action names a template from the
task spec (``Action(kind="<template>", params={...})``) and gives parameters its schema accepts
(:mod:`runtime.adapters.sql.templates`). One write is ONE transaction of the target database:

1. check the adapter's tables (:mod:`runtime.adapters.sql.store`; a dropped receipt table fails
   closed), then compare-and-set the fence row to the caller's fencing token (a stale worker is
   refused and changes nothing);
2. look the idempotency key up in the receipt table: a stored receipt is returned unchanged;
3. run the business statement, advance the version counter, insert the receipt row;
4. commit. Business write, receipt and fence become durable together or not at all, so the target
   itself is the authoritative receipt store and a crash anywhere before the commit leaves no
   trace of the write (the database rolls the transaction back).

A connection lost while committing leaves the outcome unknown; that is reported as
:class:`AdapterTimeoutError`, which the engine settles by asking the key again (never a blind
retry). Observations cover every row of the tables the templates touch, redacted
(:mod:`runtime.adapters.sql.rows`, :mod:`runtime.adapters.sql.redaction`); predictions and
dry-run diffs run the statement in a transaction that is rolled back. Imports nothing from Django.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, OperationalError

from runtime.adapters.actions import check_call
from runtime.adapters.base import AdapterContext, BlobSource, Observation
from runtime.adapters.deadline import CommitDeadline
from runtime.adapters.sql.options import SqlAdapterOptions
from runtime.adapters.sql.redaction import column_redactor
from runtime.adapters.sql.rows import Rows, row_json, rows_diff, rows_fingerprint, rows_listing, rows_read_txn
from runtime.adapters.sql.store import (
    fence_advance_txn,
    instance_read_txn,
    receipt_get_txn,
    receipt_insert_txn,
    receipts_all_txn,
    store_check_txn,
    store_install_txn,
    version_bump_txn,
)
from runtime.adapters.sql.target import target_engine, target_transaction, target_url
from runtime.adapters.sql.templates import BoundStatement, TemplateBook, sql_action_models
from runtime.core.checkpoint import Action, Receipt
from runtime.core.crashpoints import crash_point, register
from runtime.errors import (
    AdapterStoreCorruptError,
    AdapterTargetError,
    AdapterTimeoutError,
    SqlStatementError,
    SqlTargetUnavailableError,
)
from runtime.plugins.registry import plugin

KIND = "sql"
ADAPTER_VERSION = "ratchet-sql/1"
MAX_RESULT_ROWS = 50
"""``RETURNING`` rows kept in a receipt's ``result`` (the receipt lives in every checkpoint)."""

CP_BEFORE_WRITE = register(
    "sql.before_write",
    "sql: transaction open, fence advanced, no receipt for the key; business statement not run")
CP_BEFORE_COMMIT = register(
    "sql.before_commit",
    "sql: business write, version counter and receipt row in the open transaction; not committed")
CP_AFTER_COMMIT = register(
    "sql.after_commit",
    "sql: transaction committed (write, receipt and fence durable); the call has not returned")


class SqlAdapter:
    """A SQLite or PostgreSQL database as an environment; see the module docstring.

    Args:
        target: a SQLite file path, used when ``options`` gives neither ``url`` nor ``url_env``.
        options: :class:`SqlAdapterOptions` or its mapping form (``[environment.options]``).
        base_dir: directory relative SQLite paths are taken against (the task file's).

    Raises:
        AdapterTargetError: no options, options that do not validate, or an unusable URL.
        SqlTargetUnavailableError: the database cannot be reached (retryable).
        SqlReceiptStoreMissingError: the adapter's instance table was set up once and is now gone
            (a missing receipt or fence table is refused by the calls that need it).
        RedactionKeyError: columns are configured for redaction and there is no key.
    """

    kind = KIND
    accepts_not_after = True
    adapter_version = ADAPTER_VERSION
    options_model = SqlAdapterOptions

    def __init__(self, target: str | Path | None = None, *,
                 options: SqlAdapterOptions | Mapping[str, Any] | None = None,
                 base_dir: Path | None = None) -> None:
        if options is None:
            raise AdapterTargetError("the SQL adapter needs [environment.options] with its templates", kind=KIND)
        if not isinstance(options, SqlAdapterOptions):
            try:
                options = SqlAdapterOptions.model_validate(dict(options))
            except ValidationError as exc:
                raise AdapterTargetError(f"SQL adapter options do not validate: {exc.error_count()} errors",
                                         kind=KIND) from None
        self.options = options
        self._book = TemplateBook(options)
        self._redactor = column_redactor(options.redact_columns)
        url = target_url(target=target, url=options.url, url_env=options.url_env, base_dir=base_dir)
        self._engine = target_engine(url, timeout_seconds=options.statement_timeout_seconds)
        with self._transaction() as conn:
            store_install_txn(conn)
            self._instance_id, _ = instance_read_txn(conn)
        self.namespace = f"{KIND}:{self._instance_id}"

    # --- public API -------------------------------------------------------------------------

    def instance_id(self) -> str:
        """The target's instance id from ``ratchet_sql_instance`` (a new database has another)."""
        return self._instance_id

    def action_schemas(self) -> dict[str, dict[str, Any]]:
        """Each template as a tool: ``name -> {"description", "parameters": JSON Schema}``."""
        return self._book.json_schemas()

    def credentials_check(self) -> None:
        """Log in to the target and run ``SELECT 1``: the engine's probe before a resume executes
        anything (DESIGN.md section 5.9).

        Raises:
            SqlCredentialRejectedError: the login was refused (a revoked role, an expired password).
            SqlTargetUnavailableError: the target cannot be reached right now (retryable).
        """
        with self._transaction() as conn:
            conn.execute(text("SELECT 1"))

    def observe(self) -> Observation:
        """Instance, ``"s<N>"`` (N committed writes), a fingerprint of the observed tables' rows
        and a redacted ``rows.jsonl`` listing. Reads no receipt (see ``instance_read_txn``).

        Raises:
            SqlReceiptStoreMissingError (no instance row), AdapterStoreCorruptError,
            SqlTargetUnavailableError.
        """
        with self._transaction(snapshot=True) as conn:
            version = self._checked(conn, receipts=False)
            rows = self._rows(conn)
        return Observation(instance_id=self._instance_id, version=f"s{version}",
                           state_fingerprint=rows_fingerprint(rows), kind=KIND,
                           attachments={"rows.jsonl": rows_listing(rows)})

    def execute(self, action: Action, *, idempotency_key: str, intent_digest: str, fencing_token: int,
                blobs: BlobSource, approval_digest: str | None = None,
                not_after: CommitDeadline | None = None) -> Receipt:
        """Apply the named template once per idempotency key, in one target transaction.

        Args:
            action: ``kind`` names a template, ``params`` its parameters, ``target`` empty.
            idempotency_key, intent_digest, fencing_token, approval_digest: as for every adapter.
            blobs: unused (SQL parameters are inline JSON values).
            not_after: the approval's deadline (DESIGN.md section 5.5): checked immediately before
                the target transaction's COMMIT; the receipt's ``committed_at`` is that check's time
                on the deadline's clock (the receipt row commits in the same transaction).

        Returns:
            The new receipt, or the stored one unchanged when the key already has one (even for
            another intent digest: the engine compares and freezes, DESIGN.md section 6).

        Raises:
            SqlTemplateNotAllowedError, SqlParamsInvalidError: before any connection.
            FencingTokenError: the token is older than the newest seen; nothing written.
            CommitDeadlinePassedError: ``not_after`` passed before COMMIT; the transaction is
                rolled back and nothing is written.
            SqlReceiptStoreMissingError, AdapterStoreCorruptError: fail closed; nothing written.
            SqlStatementError: the database refused the statement; nothing written.
            SqlTargetUnavailableError: unreachable or locked; nothing written (retryable).
            AdapterTimeoutError: the commit's outcome is unknown; ask the key again.
        """
        check_call(idempotency_key=idempotency_key, intent_digest=intent_digest,
                   fencing_token=fencing_token, approval_digest=approval_digest, not_after=not_after)
        bound = self._book.bind(action)
        context = {"instance_id": self._instance_id, "idempotency_key": idempotency_key}
        with self._transaction() as conn:
            self._checked(conn)
            fence_advance_txn(conn, fencing_token, instance_id=self._instance_id, idempotency_key=idempotency_key)
            existing = receipt_get_txn(conn, idempotency_key, instance_id=self._instance_id)
            if existing is not None:
                return existing  # the fence advance commits with the block
            crash_point(CP_BEFORE_WRITE)
            result = self._run(conn, bound)
            seq = version_bump_txn(conn)
            receipt = Receipt(
                namespace=self.namespace, adapter_version=ADAPTER_VERSION,
                receipt_id=f"{self._instance_id}:s{seq}", idempotency_key=idempotency_key,
                intent_digest=intent_digest, result=result, environment_version_after=f"s{seq}",
                fencing_token=fencing_token,
                committed_at=not_after.check(**context) if not_after is not None else dt.datetime.now(dt.UTC),
                approval_digest=approval_digest, business_object=f"{bound.name}:{idempotency_key}"[:200],
            )
            receipt_insert_txn(conn, receipt, seq=seq, template=bound.name)
            crash_point(CP_BEFORE_COMMIT)
            if not_after is not None:
                # Leaving the block by this error rolls the transaction back: nothing lands.
                not_after.check(**context)
            try:
                conn.commit()
            except DBAPIError as exc:
                raise AdapterTimeoutError("the target database lost the connection while committing; the outcome "
                                          "is unknown and is settled by asking the key again",
                                          instance_id=self._instance_id, idempotency_key=idempotency_key,
                                          driver_error=type(exc.orig).__name__) from None
        crash_point(CP_AFTER_COMMIT)
        return receipt

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The receipt row for ``idempotency_key`` from the target database, or None.

        Raises:
            SqlReceiptStoreMissingError: the receipt table is gone (never read as "no receipt").
            AdapterStoreCorruptError: receipt rows were removed or do not parse.
            SqlTargetUnavailableError: unreachable (retryable).
        """
        with self._transaction() as conn:
            self._checked(conn)
            return receipt_get_txn(conn, idempotency_key, instance_id=self._instance_id)

    def receipts(self) -> list[Receipt]:
        """Every receipt in the target's receipt table, oldest first."""
        with self._transaction() as conn:
            self._checked(conn)
            return receipts_all_txn(conn, instance_id=self._instance_id)

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """The fingerprint after applying ``action``: the statement runs in a transaction that is
        rolled back, so nothing changes.

        Raises:
            The validation, store and statement errors of :meth:`execute`.
        """
        bound = self._book.bind(action)
        with self._transaction() as conn:
            self._checked(conn)
            self._run(conn, bound)
            after = self._rows(conn)
            conn.rollback()
        return rows_fingerprint(after)

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """Unified diff of the observed tables' rows (redacted) before and after ``action``;
        changes nothing.

        Raises:
            The validation, store and statement errors of :meth:`execute`.
        """
        bound = self._book.bind(action)
        with self._transaction() as conn:
            self._checked(conn)
            before = self._rows(conn)
            self._run(conn, bound)
            after = self._rows(conn)
            conn.rollback()
        return rows_diff(before, after) or "(no row changes)\n"

    # --- inside one transaction -----------------------------------------------------------------

    def _transaction(self, *, snapshot: bool = False) -> Any:
        return target_transaction(self._engine, instance_id=getattr(self, "_instance_id", ""), snapshot=snapshot)

    def _checked(self, conn: Connection, *, receipts: bool = True) -> int:
        instance_id, version = store_check_txn(conn) if receipts else instance_read_txn(conn)
        if instance_id != self._instance_id:
            # The database behind the URL was replaced while this adapter was open.
            raise AdapterStoreCorruptError("the target database's instance id changed under the adapter",
                                           instance_id=self._instance_id, observed=instance_id)
        return version

    def _rows(self, conn: Connection) -> Rows:
        return rows_read_txn(conn, self.options.observed_tables(), redactor=self._redactor,
                             ignore=self.options.fingerprint_ignore)

    def _run(self, conn: Connection, bound: BoundStatement) -> dict[str, Any]:
        """Run the business statement; the redacted result as a receipt keeps it.

        Raises:
            SqlStatementError: refused, or another row count than ``expect_rows``.
            SqlTargetUnavailableError: the connection failed or a lock wait timed out.
        """
        try:
            result = conn.execute(text(bound.template.sql), bound.params)
            rows = [row_json(bound.template.tables[0], m, redactor=self._redactor) for m in result.mappings()] \
                if result.returns_rows else []
            count = len(rows) if result.returns_rows else result.rowcount
        except OperationalError as exc:
            raise SqlTargetUnavailableError(instance_id=self._instance_id, template=bound.name,
                                            driver_error=type(exc.orig).__name__) from None
        except DBAPIError as exc:
            # The driver's message may quote the offending values (personal data): keep only the
            # error class, the SQLSTATE and the constraint's name.
            raise SqlStatementError(instance_id=self._instance_id, template=bound.name,
                                    driver_error=type(exc.orig).__name__, **_diagnostics(exc.orig)) from None
        expected = bound.template.expect_rows
        if expected is not None and count != expected:
            raise SqlStatementError(f"the statement changed {count} rows, the template expects {expected}; "
                                    "nothing was committed", instance_id=self._instance_id, template=bound.name)
        for table in bound.template.tables[1:]:
            rows = [self._redactor.row(table, row) for row in rows]
        return {"template": bound.name, "rowcount": count, "rows": rows[:MAX_RESULT_ROWS]}


@plugin(options=SqlAdapterOptions)
def sql_adapter(*, options: SqlAdapterOptions, context: AdapterContext) -> SqlAdapter:
    """The ``sql`` adapter plug-in (entry point ``ratchet.adapters: sql``, DESIGN.md section 5.10).

    ``environment.target`` is the SQLite database file when ``[environment.options]`` gives
    neither ``url`` nor ``url_env`` (PostgreSQL); otherwise it is not read.
    """
    return SqlAdapter(context.target, options=options)


# The plug-in's declared actions (one per template), read by the task spec to check a planner's
# known actions and by the chat-tools planner to offer tools, without opening the target.
sql_adapter.action_models = sql_action_models  # type: ignore[attr-defined]


def _diagnostics(orig: Any) -> dict[str, str]:
    diag = getattr(orig, "diag", None)
    out = {"sqlstate": getattr(orig, "sqlstate", None) or getattr(orig, "sqlite_errorname", None),
           "constraint": getattr(diag, "constraint_name", None) if diag is not None else None}
    return {k: str(v)[:100] for k, v in out.items() if v}
