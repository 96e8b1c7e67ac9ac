"""Checkpoint errors: the schema, the envelope, identity, freshness and the receipts ledger.

:class:`CheckpointError` sits under :class:`~runtime.errors.base.EvidenceError`: a checkpoint
that does not verify, is not the latest or does not fit the run fails closed (DESIGN.md
section 4), and the rows are kept as found.
"""

from __future__ import annotations

from typing import Any

from runtime.errors.base import EvidenceError


class CheckpointError(EvidenceError):
    """Base for checkpoint failures; all fail closed (DESIGN.md section 4). Context: ``run_id``,
    ``generation`` and, for freshness, ``hwm_generation``."""

    default_message = "checkpoint rejected"
    hint = "the checkpoint is kept as found and the run does not move; `manage.py checkpoint verify RUN_ID` says why"


# --- what a checkpoint holds (DESIGN.md section 3) ---------------------------------------------


class CheckpointSchemaError(CheckpointError):
    default_message = "checkpoint does not match its schema"
    hint = "the checkpoint is kept; inspect it with `manage.py checkpoint show`"


class CheckpointInvariantError(CheckpointError):
    """The checkpoint parses but its objects contradict each other (``runtime.core.invariants``)."""

    default_message = "checkpoint state breaks a cross-object invariant"
    hint = "the checkpoint is kept; `manage.py checkpoint show RUN_ID` shows it, the message names the invariant"


class CheckpointMigrationError(CheckpointError):
    default_message = "checkpoint schema version cannot be migrated"
    hint = "the checkpoint is kept for manual handling; ship a migrator for its version"


class CheckpointCorruptError(CheckpointError):
    default_message = "checkpoint bytes are not a readable envelope"
    hint = "the row is kept for inspection; the run stays frozen"


class CheckpointNotFoundError(CheckpointError):
    """No stored checkpoint for this run (and generation, when one is named)."""

    default_message = "checkpoint not found"
    hint = "check the run id and generation (`manage.py checkpoint show RUN_ID` lists its rows)"


# --- the run the checkpoint belongs to ---------------------------------------------------------


class IdentityMismatchError(CheckpointError):
    """The checkpoint names another run, tenant or environment than the one being restored."""

    default_message = "checkpoint identity does not match the run being restored"
    hint = "the checkpoint belongs to another run or environment; keep it and find how it came to be offered here"


class ScenarioMismatchError(CheckpointError):
    default_message = "scenario fingerprint differs from the one the run was started with"
    hint = "the task, policy, permissions, allowlist, initial state or verifier changed; start a new run"


class VersionMismatchError(CheckpointError):
    default_message = "task, policy or version combination changed since the run started"
    hint = "resume with the original versions or ship a migrator for the combination"


class DerivedRowMismatchError(CheckpointError):
    """A row derived from the signed checkpoint (the run row's phase, a review case's status)
    says something else than the committed checkpoint at the same generation (DESIGN.md section
    4.10). ``row`` and ``signed`` name the two values."""

    default_message = "a database row disagrees with the signed checkpoint: refusing to act on it"
    hint = ("the signed checkpoint is what counts; find who edited the row (compare it with a backup "
            "and the evidence bundle), put it back, then `manage.py resume RUN`")


# --- freshness: the high-water mark (DESIGN.md sections 4.2 and 4.3) ---------------------------


class RollbackError(CheckpointError):
    default_message = "checkpoint generation is not the high-water mark"
    hint = "an older or uncommitted checkpoint was offered; only the latest committed one restores"


class HighWaterMarkMissingError(CheckpointError):
    default_message = "no high-water mark for this run: refusing to restore"
    hint = "the HWM store or row is missing; restore it from backup, never recreate it by hand"


class MarkStoreUnavailableError(HighWaterMarkMissingError):
    """The mark store did not answer (a connection refused or ended, the server restarting): an
    outage, not evidence against the run. Restore still fails closed -- nothing runs without its
    mark -- but the run is not frozen for a person: it resumes once the store answers (DESIGN.md
    sections 4.2 and 8.8)."""

    default_message = "the high-water mark store is unavailable: failing closed"
    hint = ("nothing is lost and nothing needs deciding: bring the mark store back "
            "(RATCHET_HWM_DATABASE_URL); the run resumes once it answers")


class MarkPendingError(HighWaterMarkMissingError):
    """The main transaction committed the checkpoint (the commit point, DESIGN.md section 4.3);
    its high-water mark could not be moved. ``committed`` (set by ``checkpoint_commit``) is the
    ``CommitResult`` of what was committed."""

    default_message = "the checkpoint is committed, but its high-water mark could not be moved"
    hint = ("nothing is lost and nothing needs redoing: the next restore moves the mark once its "
            "store answers; stop here and let recovery resume the run")
    committed: Any = None


class MainDatabaseUnavailableError(CheckpointError):
    """The main database failed under a step: the connection was ended or lost (a backend
    terminated, the server restarting). Its transaction either committed whole or not at all
    (DESIGN.md section 4.3), so nothing is half-done; the run stays as last committed."""

    default_message = "the main database connection was lost during a step"
    hint = ("nothing is half-committed and nothing needs redoing: once the database answers again, "
            "`manage.py resume RUN` (or any worker) takes the run over where it was")


class StorageUnavailableError(CheckpointError):
    """A local file system refused a step's write (``ENOSPC``, ``EDQUOT``, ``EIO``, ``EROFS``):
    the var directory (attachments, the embedded database) or the environment's target. Every
    durable write is atomic or journalled (DESIGN.md sections 4.3 and 5.5), so nothing is
    half-done; context ``errno_name`` names the error."""

    default_message = "a file system refused a write during a step"
    hint = ("nothing is half-done: free space (or fix the disk) under the var directory and the run's "
            "target, then `manage.py resume RUN` takes the run over where it was")


class HighWaterMarkBehindError(CheckpointError):
    default_message = ("the main database committed generations the high-water mark never recorded: "
                       "refusing to restore")
    hint = ("the mark store lost commits (restored from a backup?) or the main database was altered; "
            "compare both with their backups before anything resumes the run")


class StaleGenerationError(CheckpointError):
    default_message = "another commit advanced the high-water mark first"
    hint = "this worker's view is stale; stop and let recovery restore the latest checkpoint"


# --- the receipts ledger (DESIGN.md section 3.1) ---------------------------------------------


class LedgerChainError(CheckpointError):
    """A run's receipts ledger does not chain to the ``(length, head)`` its checkpoint commits to.

    A row was dropped, reordered, edited, inserted or the tail truncated. The run is frozen with a
    review case; nothing is repaired automatically.
    """

    default_message = "the run's receipts ledger does not match its checkpoint"
    hint = ("the ledger rows are kept as found; compare them with the evidence bundle or a backup "
            "(`manage.py checkpoint verify RUN` names the first bad row), then decide the case")


class LedgerEntryError(CheckpointInvariantError):
    """An entry offered to the ledger breaks an invariant (a key executed twice, a nonce reused,
    a receipt whose fingerprint does not match it); nothing is written."""

    default_message = "a receipts-ledger entry breaks an invariant"
    hint = "nothing was written to the ledger; the message names the entry and the invariant it breaks"


class LedgerUnavailableError(CheckpointError):
    """A state whose checkpoint commits to a non-empty ledger has no ledger attached to read it."""

    default_message = "the run state has no readable receipts ledger"
    hint = "restore the run through `checkpoint_restore`, which attaches its ledger"
