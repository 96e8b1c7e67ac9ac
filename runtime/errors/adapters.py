"""Environment adapter errors: the built-in workspace and git adapters, SQL and HTTP targets.

Each sits under :class:`~runtime.errors.base.AdapterError` (DESIGN.md section 5.5): context names
the adapter ``instance_id`` and, where relevant, the ``idempotency_key``, ``path`` or
``fencing_token``. Unless a class says otherwise nothing was written; a ``retryable`` one is
retried by the engine, any other freezes the run for review.
"""

from __future__ import annotations

from runtime.errors.base import AdapterError

# --- any adapter -------------------------------------------------------------------------------


class UnknownAdapterError(AdapterError):
    default_message = "no adapter of this kind"
    hint = "known adapter kinds are 'workspace' and 'git'"


class AdapterTargetError(AdapterError):
    default_message = "adapter target is not a usable environment"
    hint = (
        "point the adapter at an existing directory (workspace) or at the top of a non-bare git "
        "repository with at least one commit (git)"
    )


class EnvironmentIdentityError(AdapterError):
    """The directory at the run's target is not the environment instance the control plane
    registered (DESIGN.md section 5.4): another location, or another directory (device/inode) at
    the same location, such as a byte copy put in place of the original. Nothing was written."""

    default_message = "the environment is not the registered instance (a copy or a move)"
    hint = ("find the original directory and put it back; if the copy is meant to be a new "
            "environment, remove .ratchet/instance-id (or ratchet.instance-id) in it and start a new run")


class InvalidActionError(AdapterError):
    """The action (or a call argument such as the idempotency key) is malformed for this adapter."""

    default_message = "action is not a well-formed write for this adapter"
    hint = "nothing was written; the planner must propose a valid action"


class PathEscapeError(InvalidActionError):
    default_message = "path escapes the environment or touches an area the adapter owns"
    hint = "use a relative path without '..', '.git', the adapter's journal or symlinks on the way"


class BlobDigestMismatchError(AdapterError):
    default_message = "blob content does not match the sha256 digest the action names"
    hint = "the attachment store returned other bytes than were proposed; nothing was written"


class BlobUnavailableError(AdapterError):
    default_message = "content blob named by the action is not available"
    retryable = True
    hint = "store the attachment before executing the action"


class PreconditionFailedError(AdapterError):
    default_message = "the environment is not in a state this write can apply to"
    hint = "observe again and replan; nothing was written"


class ConcurrentWriteError(AdapterError):
    default_message = "another writer moved the environment during the write; nothing was committed"
    retryable = True
    hint = "observe again: the environment moved underneath this call"


class AdapterBusyError(AdapterError):
    default_message = "timed out waiting for the adapter's lock"
    retryable = True
    hint = "another process is writing to the same environment; try again"


class AdapterTimeoutError(AdapterError):
    """An adapter call (or the subprocess it runs) timed out; for a write, whether it committed is
    unknown (DESIGN.md section 5.3), and the engine settles that by asking the adapter for the
    idempotency key, never by a blind retry."""

    default_message = "adapter call timed out: the write's outcome is unknown"
    retryable = True
    hint = "the engine queries the adapter by idempotency key before anything else"


class AdapterStoreCorruptError(AdapterError):
    default_message = "the adapter's own receipt store is unreadable"
    hint = "keep the store for inspection; runs using this environment need human review"


class DuplicateReceiptError(AdapterStoreCorruptError):
    default_message = "more than one receipt in the adapter's store carries this idempotency key"
    hint = "one key must have exactly one effect; a human must decide which commit counts"


class ReceiptIndeterminateError(AdapterError):
    default_message = "an interrupted write is neither clearly committed nor clearly not applied"
    hint = "the target changed out of band after a crash mid-write; a human must decide"


class AdapterCommandError(AdapterError):
    """A subprocess the adapter runs (``git``) failed. Context: ``git`` (the subcommand),
    ``exit_code``; the message carries the start of its error output."""

    default_message = "an adapter subprocess failed"
    hint = "the message quotes the command's error; check the environment's repository by hand"


class CommitDeadlinePassedError(AdapterError):
    """The approval's deadline (``not_after``, database clock) passed before the adapter reached
    its commit point, so it refused to commit (DESIGN.md sections 4.7 and 5.5). Nothing was
    written; context names ``not_after`` and how late the check was (``late_by_seconds``)."""

    default_message = "the approval expired before the write could commit; nothing was written"
    hint = "an approver refreshes the approval (a longer --ttl if the call is slow); the run waits for it"


# --- SQL targets (DESIGN.md section 5.11) ----------------------------------------------------


class SqlTemplateNotAllowedError(InvalidActionError):
    """The action names no statement template of the SQL adapter; nothing was sent to the database."""

    default_message = "action names no SQL template this task spec allows"
    hint = "only the templates under [environment.options.templates] can run; the planner must name one"


class SqlParamsInvalidError(InvalidActionError):
    """A parameter fails its template's schema; the message names fields, never values."""

    default_message = "action parameters fail the SQL template's schema"
    hint = "nothing was written; the planner must give parameters the template's schema accepts"


class SqlReceiptStoreMissingError(AdapterStoreCorruptError):
    """The adapter's receipt (or fence) table is gone from a target database the adapter set up:
    "no receipt" cannot be told from "receipts lost", so nothing executes (fail closed)."""

    default_message = "the SQL adapter's receipt store is missing from the target database"
    hint = ("restore the ratchet_sql_* tables from a backup; until then runs on this target stay frozen "
            "for review (a reviewer may abort them)")


class SqlStatementError(AdapterError):
    """The target database refused the template's statement (a constraint, a type, a row count
    other than ``expect_rows``); the whole transaction was rolled back."""

    default_message = "the target database refused the SQL statement; nothing was committed"
    hint = "look at the target's rows and constraints; a reviewer replans or aborts the run"


class SqlTargetUnavailableError(AdapterError):
    """The target database could not be reached or was busy; nothing was committed."""

    default_message = "the SQL target database is unreachable or busy"
    retryable = True
    hint = "check the target database is up and the URL is right; the step is retried"


class SqlCredentialRejectedError(AdapterError):
    """The SQL target refused the adapter's login (a revoked role, an expired password): no retry
    can fix that, so a resume freezes the run before anything executes (DESIGN.md section 5.9)."""

    default_message = "the SQL target database refused the adapter's credential"
    hint = "renew the credential behind options.url_env (or the role's LOGIN) and let a reviewer resume the run"


# --- HTTP services (DESIGN.md sections 5.8 and 5.9) ------------------------------------------


class HttpRequestNotAllowedError(InvalidActionError):
    """An HTTP action names a host, method or path the adapter's allowlist does not hold; refused
    before any request was made."""

    default_message = "HTTP request refused by the allowlist before it was sent"
    hint = "nothing was sent; add the host, method or path template to the task spec's HTTP options or replan"


class HttpOutcomeUnknownError(AdapterTimeoutError):
    """A write's request timed out, lost its connection or got a 5xx: it may or may not have
    committed. The engine settles it by asking the service for the idempotency key, never by a
    blind retry."""

    default_message = "HTTP write outcome unknown (timeout, connection error or 5xx)"


class HttpRequestInFlightError(AdapterError):
    """The service is still processing an earlier request with this idempotency key (409)."""

    default_message = "the service is still processing a request with this idempotency key"
    retryable = True
    hint = "the step is retried later with the same key; nothing new was sent"


class HttpServiceUnavailableError(AdapterError):
    """The service cannot be reached for a read (state, lookup, probe)."""

    default_message = "the HTTP service cannot be reached"
    retryable = True
    hint = "check that the service is up and reachable; the step is retried later"


class HttpCredentialExpiredError(AdapterError):
    """The service refused the adapter's credential (401/403) or none is configured."""

    default_message = "the HTTP adapter's credential is expired, revoked or missing"
    hint = ("renew the credential in the environment variable the task spec names; the run stays frozen "
            "until an operator deals with it and nothing was written")


class HttpRequestRejectedError(AdapterError):
    """The service refused the write with a 4xx that says nothing was done (bad request, not found)."""

    default_message = "the HTTP service rejected the write"
    hint = "nothing was written; the action does not fit the service, replan"


class HttpContractError(AdapterStoreCorruptError):
    """A state or idempotency-record response does not have the shape the adapter needs."""

    default_message = "the HTTP service's state or idempotency record is malformed"
    hint = ("the service answered in a shape the adapter does not know; check its version against the "
            "task spec's HTTP options; runs using it need human review")
