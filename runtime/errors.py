"""The runtime's exception tree (house style 3: one tree per package).

Every error says what failed, carries the identifiers an operator needs (run id, generation, key
id -- never key material) and says whether retrying can help (``retryable``). Errors pickle
cleanly so they survive crossing a Celery boundary: each stores its keyword arguments and
rebuilds from them in ``__reduce__``.

This module imports nothing from Django so the framework-free core can raise these errors.
"""

from __future__ import annotations

from typing import Any


class RatchetError(Exception):
    """Base of every error the runtime raises on purpose.

    Args (keyword-only, all optional): identifiers such as ``run_id``, ``generation``,
    ``key_id``, ``idempotency_key``; they are kept in ``self.context`` and shown in ``str()``.

    Class attributes:
        retryable: True when the same call may succeed later without operator action.
        hint: what the operator can do about it.
    """

    retryable: bool = False
    hint: str = ""
    default_message: str = "runtime error"

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or self.default_message
        self.context = {k: v for k, v in context.items() if v is not None}
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.context:
            parts.append(" (" + ", ".join(f"{k}={v}" for k, v in sorted(self.context.items())) + ")")
        if self.hint:
            parts.append(f". Hint: {self.hint}")
        return "".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.context))


def _rebuild(cls: type[RatchetError], message: str, context: dict[str, Any]) -> RatchetError:
    return cls(message, **context)


# --- configuration -------------------------------------------------------------------------


class ConfigurationError(RatchetError):
    default_message = "runtime configuration is invalid"
    hint = "fix the named environment variable or file and restart"


# --- digests, canonical JSON ----------------------------------------------------------------


class CanonicalizationError(RatchetError):
    default_message = "value cannot be serialised as RFC 8785 canonical JSON"
    hint = "only JSON types are allowed (no NaN/Infinity, no sets, bytes or objects)"


class DigestFormatError(RatchetError):
    default_message = "digest is not of the form sha256:<64 lowercase hex>"


# --- signing, keys --------------------------------------------------------------------------


class SigningError(RatchetError):
    """Base for authenticity failures (DESIGN.md section 4, Authenticity)."""

    default_message = "signature check failed"


class UnknownKeyError(SigningError):
    default_message = "signed with a key id this trust root does not know"
    hint = "add the key to the trust root's keyring if it is legitimate; otherwise treat as forged"


class BadSignatureError(SigningError):
    default_message = "MAC does not verify: the data was altered or signed with another key"
    hint = "the stored copy is corrupt or forged; keep it for inspection and restore from a trusted source"


class KeyringError(ConfigurationError):
    default_message = "keyring is misconfigured"


# --- checkpoints ----------------------------------------------------------------------------


class CheckpointError(RatchetError):
    """Base for checkpoint failures; all fail closed (DESIGN.md section 4)."""

    default_message = "checkpoint rejected"


class CheckpointSchemaError(CheckpointError):
    default_message = "checkpoint does not match its schema"
    hint = "the checkpoint is kept; inspect it with `manage.py checkpoint show`"


class CheckpointInvariantError(CheckpointError):
    default_message = "checkpoint state breaks a cross-object invariant"


class CheckpointMigrationError(CheckpointError):
    default_message = "checkpoint schema version cannot be migrated"
    hint = "the checkpoint is kept for manual handling; ship a migrator for its version"


class CheckpointCorruptError(CheckpointError):
    default_message = "checkpoint bytes are not a readable envelope"
    hint = "the row is kept for inspection; the run stays frozen"


class IdentityMismatchError(CheckpointError):
    default_message = "checkpoint identity does not match the run being restored"


class ScenarioMismatchError(CheckpointError):
    default_message = "scenario fingerprint differs from the one the run was started with"
    hint = "the task, policy, permissions, allowlist, initial state or verifier changed; start a new run"


class VersionMismatchError(CheckpointError):
    default_message = "task, policy or version combination changed since the run started"
    hint = "resume with the original versions or ship a migrator for the combination"


class RollbackError(CheckpointError):
    default_message = "checkpoint generation is not the high-water mark"
    hint = "an older or uncommitted checkpoint was offered; only the latest committed one restores"


class HighWaterMarkMissingError(CheckpointError):
    default_message = "no high-water mark for this run: refusing to restore"
    hint = "the HWM store or row is missing; restore it from backup, never recreate it by hand"


class StaleGenerationError(CheckpointError):
    default_message = "another commit advanced the high-water mark first"
    hint = "this worker's view is stale; stop and let recovery restore the latest checkpoint"


class CheckpointNotFoundError(CheckpointError):
    default_message = "checkpoint not found"


# --- leases ---------------------------------------------------------------------------------


class LeaseError(RatchetError):
    """Base for ownership failures (DESIGN.md section 4, Ownership)."""

    default_message = "lease check failed"


class LeaseHeldError(LeaseError):
    default_message = "the run's lease is held by another worker and has not expired"
    retryable = True
    hint = "wait for the lease to expire or for the holder to release it"


class LeaseLostError(LeaseError):
    default_message = "this worker no longer holds the run's lease"
    hint = "stop working on the run; another worker has taken it over"


class FencingTokenError(LeaseError):
    default_message = "fencing token is older than the newest the adapter has seen"
    hint = "a newer lease holder exists; this worker must stop"


class RunNotFoundError(RatchetError):
    default_message = "run not found"


# --- trace ----------------------------------------------------------------------------------


class TraceChainError(RatchetError):
    default_message = "trace hash chain does not verify"
    hint = "an event was edited, inserted or deleted; keep the database for forensics"


class AttachmentError(RatchetError):
    default_message = "attachment content does not match its sha256 digest"


# --- step engine, receipts (exactly-once issue) ----------------------------------------------


class EngineError(RatchetError):
    default_message = "the step engine met a state it cannot handle"
    hint = "the run is left at its last committed checkpoint; report this with the run id"


class ReceiptConflictError(RatchetError):
    default_message = "idempotency key is already bound to a different intent or receipt"
    hint = "the run freezes for review; a reviewer decides replan or abort"


class KeyQuarantinedError(RatchetError):
    default_message = "idempotency key is quarantined and can never be used again"
    hint = "a reviewer's replan retired this key; the run continues with a new one"


class AdapterTimeoutError(RatchetError):
    default_message = "adapter call timed out: the write's outcome is unknown"
    retryable = True
    hint = "the engine queries the adapter by idempotency key before anything else"


# --- task specs, policy, planners, verifiers -------------------------------------------------


class TaskSpecError(RatchetError):
    """A task spec TOML (or a stored spec) is unreadable or invalid; the message names every bad field."""

    default_message = "task spec is invalid"
    hint = "fix the named fields in the task file; the run was not created"


class PolicyViolationError(RatchetError):
    """An action's kind or a path it touches is outside the run's allowed scope (DESIGN.md section 3)."""

    default_message = "action is outside the policy's allowed scope"
    hint = "the action is not executed; replan, or widen the policy in a new policy version"


class PlannerError(RatchetError):
    """Base for planner failures: the planner cannot propose a deterministic next action."""

    default_message = "planner cannot propose an action"


class PlannerStateError(PlannerError):
    default_message = "planner state in the checkpoint does not match this planner"
    hint = "the checkpoint was made by another planner or edited; the run needs manual handling"


class GitReplayError(PlannerError):
    """The git-history planner could not read its source repository or range."""

    default_message = "git history replay failed"
    hint = "check that the source repository and the commit range exist and are readable"


class GitReplayUnsupportedError(GitReplayError):
    default_message = "the commit range holds an entry the replay cannot express as file writes"
    hint = "submodules, symlinks and non-UTF-8 names are not replayed; choose another range"


class ReplayTargetNotEmptyError(PlannerError):
    default_message = "replay target already exists and is not empty: refusing to touch it"
    hint = "choose a fresh target path or remove the old one by hand"


class VerifierError(RatchetError):
    """The verifier could not reach the reference it compares against (not a failed verdict)."""

    default_message = "verifier could not run"
    retryable = True


# --- persistence services (leases, commits, crash points) -----------------------------------


class RunExistsError(RatchetError):
    default_message = "a run with this id already exists"
    hint = "run ids are unique; resume the existing run instead of creating it again"


class CrashPointError(RatchetError):
    default_message = "unknown crash point"
    hint = "crash point names must be registered with runtime.core.crashpoints.register first"


# --- framework-free core: digests, trust roots, state machine (added for the core) -----------


class UnknownDigestKindError(DigestFormatError, ValueError):
    """A digest was requested for a domain tag that is not a ``DigestKind``.

    Also a ``ValueError`` because ``DigestKind(kind)`` raised that before this error existed.
    """

    default_message = "unknown digest kind"


class WrongTrustRootError(KeyringError, ValueError):
    """A keyring of one trust root was used where another root is required (DESIGN.md section 4).

    Also a ``ValueError`` because ``seal`` raised that before this error existed.
    """

    default_message = "keyring belongs to another trust root"
    hint = "checkpoints, approvals and reviewer decisions each have their own keyring"


class IllegalTransitionError(RatchetError):
    """An event that the run state machine (DESIGN.md section 6) does not allow in this phase.

    Context: ``phase``, ``event`` and, when the caller knows it, ``run_id``. Terminal phases
    accept no event at all.
    """

    default_message = "event is not allowed in the run's current phase"
    hint = "the run's phase changed under this caller or a step was skipped; re-read the run"


# --- environment adapters (exactly-once issue: workspace and git adapters) --------------------


class AdapterError(RatchetError):
    """Base for environment adapter failures (DESIGN.md section 5).

    Context names the adapter ``instance_id`` and, where relevant, the ``idempotency_key``,
    ``path`` or ``fencing_token``. Unless a subclass says otherwise nothing was written.
    """

    default_message = "adapter call failed"


class UnknownAdapterError(AdapterError):
    default_message = "no adapter of this kind"
    hint = "known adapter kinds are 'workspace' and 'git'"


class AdapterTargetError(AdapterError):
    default_message = "adapter target is not a usable environment"
    hint = (
        "point the adapter at an existing directory (workspace) or at the top of a non-bare git "
        "repository with at least one commit (git)"
    )


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
    default_message = "an adapter subprocess failed"


# --- operator dashboard (review app) --------------------------------------------------------


class RoleSetupError(ConfigurationError):
    """The dashboard's role permissions are missing, so the groups cannot be built."""

    default_message = "dashboard role permissions are missing from the database"
    hint = "run `manage.py migrate` first, then `manage.py ratchet_roles`"


# --- approvals and review decisions ----------------------------------------------------------


class ApprovalRefusedError(RatchetError):
    default_message = "approval refused"
    hint = "look at the run again: the pending action or its environment is not what was approved"


class DecisionRefusedError(RatchetError):
    default_message = "reviewer decision refused: the run stays frozen"
    hint = "the refusal is in the run's trace; look at the case again and sign a fresh decision"


class ReviewCaseNotFoundError(RatchetError):
    default_message = "review case not found"


# --- evidence bundles and the demo (dashboard, second half) ----------------------------------


class BundleError(RatchetError):
    """Base for evidence bundle failures (export or offline verification)."""

    default_message = "evidence bundle error"


class BundleExportError(BundleError):
    """The run's evidence does not verify, so no signed bundle is made for it (signing it would
    vouch for evidence the runtime itself rejects)."""

    default_message = "cannot export an evidence bundle for this run"
    hint = "open the run detail page or `manage.py checkpoint verify RUN_ID` to see what fails"


class BundleFormatError(BundleError):
    """A bundle file is not JSON or not a bundle object at all."""

    default_message = "not an evidence bundle"
    hint = "pass the JSON file written by `manage.py export-bundle` or the dashboard download"


class DemoSetupError(RatchetError):
    """The demo cannot seed its runs (for example the repository has too few commits)."""

    default_message = "the demo cannot be set up"
    hint = "run the demo from a clone of the repository with its full history (not shallow)"


# --- benchmarks (manage.py bench) -------------------------------------------------------------


class BenchmarkError(RatchetError):
    """A benchmark could not measure what it set out to (a child failed, a replay did not
    complete, a recovery froze or duplicated a write). Context names the run id or the child's
    exit code where there is one. Not retryable as such: the cause is in the output above."""

    default_message = "benchmark failed"
    hint = "no numbers were printed; the measuring child's output above says what failed"


class BenchmarkScratchError(BenchmarkError):
    """The throwaway database for ``manage.py bench`` cannot be made, or the measuring process
    is not pointed at one: benchmarks never run against the user's real database."""

    default_message = "refusing to benchmark outside a throwaway database"
    hint = ("benchmarks run only via `manage.py bench`, on the scratch database it creates and "
            "removes; drop a leftover <name>_bench by hand once no bench is running")
