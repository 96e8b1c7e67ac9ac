"""The runtime's exception tree (STYLE.md rule 3: one tree for the whole runtime).

Every error says what failed, carries the identifiers an operator needs (run id, generation, key
id -- never key material) and says whether retrying can help (``retryable``). Errors pickle
cleanly so they survive crossing a Celery boundary: each stores its keyword arguments and
rebuilds from them in ``__reduce__``.

This module imports nothing from Django so the framework-free core can raise these errors.

Over 400 lines: one exception tree for the whole app (STYLE.md rule 3), so every error is found here.
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


class NestingTooDeepError(RatchetError, ValueError):
    """Outside input (JSON, TOML) nests arrays/objects deeper than ``runtime.core.nesting``
    allows (DESIGN.md section 2.2). A ``ValueError`` too, so a decoder that already turns bad
    input into its own typed error (not JSON, corrupt checkpoint) does so for this one."""

    default_message = "input is nested deeper than Ratchet reads"
    hint = "nothing Ratchet writes nests this deep; the input is malformed or hostile, retrying will not help"


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


class MarkPendingError(HighWaterMarkMissingError):
    """The main transaction committed the checkpoint (the commit point, DESIGN.md section 4.3);
    its high-water mark could not be moved. ``committed`` (set by ``checkpoint_commit``) is the
    ``CommitResult`` of what was committed."""

    default_message = "the checkpoint is committed, but its high-water mark could not be moved"
    hint = ("nothing is lost and nothing needs redoing: the next restore moves the mark once its "
            "store answers; stop here and let recovery resume the run")
    committed: Any = None


class HighWaterMarkBehindError(CheckpointError):
    default_message = ("the main database committed generations the high-water mark never recorded: "
                       "refusing to restore")
    hint = ("the mark store lost commits (restored from a backup?) or the main database was altered; "
            "compare both with their backups before anything resumes the run")


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


class RunSpecMissingError(RatchetError):
    """A run's row has no stored task spec (or no target) to open its adapter from; ``missing``
    names the absent ``spec`` keys. Nothing can be observed or decided for it."""

    default_message = "the run has no stored task spec to open its environment from"
    hint = ("its row lost the spec stored when it was created (edited by hand, or written by another tool); restore "
            "the run's `spec` from a backup to review it, or discard a run that died before its first checkpoint "
            "(`manage.py runs --half-created`, `manage.py discard_run`)")


# --- the agent gateway (DESIGN.md section 5.12) ---------------------------------------------


class GatewayError(RatchetError):
    """Base of the gateway's refusals: each has a stable ``code`` and an HTTP ``status`` that the
    JSON API and the MCP server report as they are, and none changes anything (DESIGN.md
    section 5.12). The context carries run and call ids, never a token."""

    code = "gateway_error"
    status = 400
    default_message = "the gateway refused the call"


class GatewayTokenError(GatewayError):
    code, status = "token_invalid", 401
    default_message = "the token is unknown, revoked or expired"
    hint = "ask an operator for a new token (`manage.py gateway_tokens issue`); retrying will not help"


class GatewayTokenMissingError(GatewayTokenError):
    code = "token_missing"
    default_message = "no token: send Authorization: Bearer <gateway token>"
    hint = ("send the token the operator issued (`manage.py gateway_tokens issue`) in the Authorization "
            "header, or set RATCHET_GATEWAY_TOKEN for --stdio; nothing was recorded")


class GatewayScopeError(GatewayError):
    code, status = "token_scope", 403
    default_message = "the token does not cover this run or action"
    hint = "use the token issued for this run; an operator can issue one with the action allowed"


class GatewayRateLimitedError(GatewayError):
    code, status = "rate_limited", 429
    retryable = True
    default_message = "too many calls with this token"
    hint = "wait for the window (RATCHET_GATEWAY_RATE_WINDOW_SECONDS) to pass, then repeat the same call id"


class GatewayInputError(GatewayError):
    code, status = "invalid_input", 422
    default_message = "the call is malformed or its arguments fail the action's schema"
    hint = "fix the arguments; nothing was recorded"


class GatewayUnknownActionError(GatewayInputError):
    code = "unknown_action"
    default_message = "the run has no such action"
    hint = "list the run's actions (tools/list or GET /api/v1/runs/<id>) and use one of them"


class GatewayPayloadTooLargeError(GatewayInputError):
    code, status = "payload_too_large", 413
    default_message = "the call is larger than the gateway accepts"
    hint = "send less than RATCHET_GATEWAY_MAX_BYTES bytes; nothing was recorded"


class GatewayPolicyRefusedError(GatewayError):
    code, status = "policy_refused", 403
    default_message = "the run's policy does not allow this action"
    hint = "an operator can start a run whose policy allows it; nothing was recorded or executed"


class GatewayTokenScopeInvalidError(GatewayError):
    code, status = "token_scope_invalid", 400
    default_message = "a per-agent token needs either a list of runs or a task, not both or neither"
    hint = "issue it with --run RUN_ID (repeatable) or with --task TASK_ID; nothing was issued"


class GatewayCallConflictError(GatewayError):
    code, status = "call_conflict", 409
    default_message = "this call id was already used with other arguments"
    hint = "use a new call id for a new action; the first call's receipt stands"


class GatewayRunStoppedError(GatewayError):
    code, status = "run_stopped", 409
    default_message = "the run is frozen for review or has ended"
    hint = "a reviewer decides frozen runs in the dashboard (cases); an ended run takes no calls"


class GatewayRunBusyError(GatewayError):
    code, status = "run_busy", 503
    retryable = True
    default_message = "another process holds the run's lease"
    hint = "repeat the same call id after the lease expires (RATCHET_LEASE_SECONDS); it runs once"


class GatewayCallLimitError(GatewayError):
    code, status = "call_limit", 409
    default_message = "the run has recorded as many calls as its planner state holds"
    hint = "finish this run and start another one for further calls"


# --- trace ----------------------------------------------------------------------------------


class TraceChainError(RatchetError):
    default_message = "trace hash chain does not verify"
    hint = "an event was edited, inserted or deleted; keep the database for forensics"


class AttachmentError(RatchetError):
    default_message = "attachment content does not match its sha256 digest"


# --- step engine, receipts (DESIGN.md section 5) ---------------------------------------------


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


class PolicyActionsError(TaskSpecError):
    """A planner that offers the adapter's actions (chat-tools, external) would offer none: the
    policy's ``allowed_actions`` names none of them (``runtime.taskspec.offered_actions``)."""

    default_message = "the policy allows none of the actions the adapter offers"
    hint = "list at least one of the adapter's actions (named above) in policy.allowed_actions; the run was not created"


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
    hint = ("the error names the commit and why an action cannot carry it (a path that is not "
            "UTF-8, a message git could not show past its trailers); choose another range")


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


# --- environment adapters: workspace and git (DESIGN.md section 5.5) --------------------------


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


class CommitDeadlinePassedError(AdapterError):
    """The approval's deadline (``not_after``, database clock) passed before the adapter reached
    its commit point, so it refused to commit (DESIGN.md sections 4.7 and 5.5). Nothing was
    written; context names ``not_after`` and how late the check was (``late_by_seconds``)."""

    default_message = "the approval expired before the write could commit; nothing was written"
    hint = "an approver refreshes the approval (a longer --ttl if the call is slow); the run waits for it"


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


class DecisionExpiredError(DecisionRefusedError):
    """A signed decision used after its signed ``expires_at`` (or without one) by the database
    clock (DESIGN.md section 6.3); the run stays frozen and the refusal is traced."""

    default_message = "reviewer decision expired: the run stays frozen"
    hint = "sign a fresh decision (it is valid for RATCHET_DECISION_SECONDS by the database clock)"


class ApprovalTtlError(ApprovalRefusedError, ValueError):
    """An approval validity that is not a finite number of seconds in ``(0, max]`` (DESIGN.md
    section 6.2). Also a ``ValueError`` because ``approval_sign`` raised that before."""

    default_message = "approval validity is not a finite number of seconds within the configured maximum"
    hint = "pass a positive number of seconds (--ttl) no larger than RATCHET_APPROVAL_MAX_SECONDS"
    retryable = False


class ReviewCaseNotFoundError(RatchetError):
    default_message = "review case not found"


class AdmissionClosedError(RatchetError):
    """New runs of a tenant and task are refused: a rollout metric crossed its threshold over the
    sliding window (DESIGN.md section 8.3). Context: ``tenant_id``, ``task_id``, ``metric``,
    ``value``, ``threshold``, ``window_seconds``. Runs in flight are not affected."""

    default_message = "admission is closed for this tenant and task"
    hint = ("runs in flight continue; check the runs with unresolved side effects one by one, then an "
            "admin re-opens admission with `manage.py admission reopen TENANT TASK --by NAME --reason ...`")


class AdmissionScopeUnknownError(RatchetError):
    """No run, metric counter, threshold override or earlier decision names this tenant and task,
    so a re-open decision would be about nothing (a misspelt scope; DESIGN.md section 8.3).
    Context: ``tenant_id``, ``task_id``."""

    default_message = "no such admission scope"
    hint = "`manage.py admission status` lists every known scope; check the tenant and task spelling"


class AdmissionThresholdError(RatchetError):
    """An admission threshold change was refused: an unknown threshold name, a value outside its
    range, no reason or no changer given, or a scope of the wrong shape (DESIGN.md section 8.3).
    Context: ``tenant_id``, ``task_id``, ``name``."""

    default_message = "the admission threshold change is refused"
    hint = "the message names the rule; rates are 0..1, counts whole numbers >= 0, seconds > 0"


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
    hint = "pass the JSON file written by `manage.py export_bundle` or the dashboard download"


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


# --- the chaos command (manage.py chaos, DESIGN.md section 8.2) ----------------------------


class ChaosSetupError(RatchetError):
    """``manage.py chaos`` could not set up what it tests with: its scratch store cannot be
    created or migrated, the task spec cannot be copied, or the uninterrupted run of the task does
    not complete on its own. Nothing was killed yet, so this is no finding about recovery."""

    default_message = "the chaos campaign could not be set up"
    hint = ("fix the task or the store named above (the uninterrupted run must complete without a "
            "human: no approval steps, a verifier it passes), then run `manage.py chaos` again")


# --- discarding half-created runs (manage.py discard_run) -----------------------------------


class RunDiscardRefusedError(RatchetError):
    """An operator asked to discard a run that is not half-created: it committed a checkpoint
    (or may have: its high-water mark is unreadable), or it holds receipts or review cases.
    Such a run is evidence and is never deleted; retrying cannot help."""

    default_message = "refusing to discard a run that is not half-created"
    hint = ("only a run that died before its first checkpoint can be discarded; resume, cancel or "
            "review this one instead")


# --- the demo's processes (manage.py demo) ----------------------------------------------------


class DemoLaunchError(RatchetError):
    """The demo's web server or worker cannot be started (the port is taken, or the web server
    exited or did not listen in time). The message says which; the child's own output above
    says why."""

    default_message = "the demo's processes cannot be started"


# --- plug-ins: planners, adapters and verifiers by name (DESIGN.md section 5.10) -------------


class PluginError(RatchetError):
    """Base for plug-in failures (DESIGN.md section 5.10). Context names the ``group``
    (``ratchet.planners``, ``ratchet.adapters``, ``ratchet.verifiers``), the ``plugin`` name and,
    where known, the ``entry`` (``module:Attr``) and the ``distribution`` that provided it."""

    default_message = "plug-in failed"


class PluginNotFoundError(PluginError, TaskSpecError):
    """No plug-in of that name is registered in the group (nothing was imported or run). A task
    spec naming one is invalid, so this is also a :class:`TaskSpecError`."""

    default_message = "no plug-in of this name"
    hint = ("install the package that provides it (its entry points register the name), fix the "
            "spelling, or name the code directly with kind = \"python\" and entry = \"module:Attr\"")


class PluginLoadError(PluginError, TaskSpecError):
    """The plug-in's entry point or dotted path names code that cannot be imported, or the object
    it names is not a plug-in (no pydantic ``Options`` model, not callable). Also a
    :class:`TaskSpecError`: the run is not created (or not resumed)."""

    default_message = "plug-in cannot be loaded"
    hint = "check that the package is installed in this environment and that the entry names a plug-in class"


class PluginConstructionError(PluginError):
    """The plug-in raised while being constructed from its options; nothing was executed."""

    default_message = "plug-in raised while being constructed"
    hint = "the message names the exception the plug-in raised; fix the plug-in or its options"


class PluginFailedError(PluginError):
    """A plug-in raised while proposing, observing or verifying; the run is frozen for review
    and nothing was executed for the failed call."""

    default_message = "plug-in raised during a call"
    hint = "read the plug-in's exception in the review case; fix the plug-in, then replan or abort"


class PluginVersionMismatchError(PluginError):
    """A run is resumed under another distribution or version of a plug-in than the one pinned
    when the run was created; the resume is refused before anything is proposed or executed."""

    default_message = "plug-in version differs from the one pinned with the run"
    hint = ("reinstall the pinned version to resume, or start a new run under the new version "
            "(migrating a run to new plug-in versions is not supported yet)")


class PlannerStateTooLargeError(PlannerError):
    """The planner returned a state whose canonical JSON exceeds the bound kept in every
    checkpoint (``MAX_PLANNER_STATE_BYTES``); nothing was proposed or executed."""

    default_message = "planner state is too large for a checkpoint"
    hint = ("keep large context out of the state: store it with put_blob and keep only its "
            "sha256 digest in the state")


# --- SQL adapter (DESIGN.md section 5.11) ---------------------------------------------------


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


# --- the chat-tools planner (DESIGN.md section 6.7) -----------------------------------------


class ModelReplyError(PlannerError):
    """Base for a model reply the chat-tools planner cannot turn into a proposal. Nothing is
    executed for it; the planner retries a bounded number of times, tracing each attempt."""

    default_message = "the model's reply cannot be used as a proposal"
    hint = "read the trace's planner.model_error events; fix the model, its prompt or its server"


class MalformedModelReplyError(ModelReplyError):
    default_message = "the model's reply is malformed (not a chat completion, or no single tool call)"
    hint = "the model must answer with exactly one tool call; check the server speaks chat-completions"


class UnknownToolError(ModelReplyError):
    default_message = "the model called a tool that was not offered"
    hint = "only the adapter's actions and finish are offered; check the prompt and the model"


class ToolArgumentsError(ModelReplyError):
    default_message = "the model's tool arguments are not JSON or fail the tool's schema"
    hint = "the error names the failing fields; check the tool schema digest pinned with the run"


class ModelRefusalError(ModelReplyError):
    default_message = "the model refused to answer"
    hint = "read the refusal in the recorded reply; change the task or the prompt in a new run"


_MODEL_GAVE_UP = ("the planner gave up after its bounded retries, so the run is frozen for review and nothing was "
                  "executed: once the model answers, a reviewer replans the case (the model is asked again) or "
                  "aborts it")
"""What follows a model error the chat-tools planner gave up on: the engine freezes the run (DESIGN.md section 6.7)."""


class ModelTimeoutError(ModelReplyError):
    retryable = True
    default_message = "the model server did not answer in time"
    hint = f"check the model server at base_url; {_MODEL_GAVE_UP}"


class ModelRateLimitedError(ModelReplyError):
    retryable = True
    default_message = "the model server refused with 429 (rate limited)"
    hint = f"wait, or raise the limit of the model server at base_url; {_MODEL_GAVE_UP}"


class ModelUnavailableError(ModelReplyError):
    retryable = True
    default_message = "the model server could not be reached or answered with a server error"
    hint = f"the model is unreachable or failing at base_url: start it; {_MODEL_GAVE_UP}"


class ModelAuthError(ModelReplyError):
    default_message = "the model server refused the API key (401/403) or the request (4xx)"
    hint = f"set the API key variable the spec names (never in the task file) for the worker; {_MODEL_GAVE_UP}"


class ModelPinMismatchError(PlannerStateError):
    """The model, prompt digest or tool-schema digest differs from what was pinned with the run."""

    default_message = "model, prompt or tool schema differs from the versions pinned with the run"
    hint = ("a resume must use the pinned model, prompt and tool schema; restore them, or start a "
            "new run under the new versions")


class ModelBudgetExhaustedError(PlannerError):
    """A chat-tools budget (model calls, tokens, model seconds) is used up; the model was not asked."""

    default_message = "the chat-tools planner's budget is used up"
    hint = "raise the budget in a new task version, or accept the run as stopped"


class ModelReplyMissingError(PlannerStateError):
    """A reply digest committed in the planner state names no stored attachment."""

    default_message = "a recorded model reply committed with the run is missing or corrupt"
    hint = "the reply cannot be replayed and the model is never asked twice for a committed step; review the run"


# --- the HTTP adapter and redacted evidence (DESIGN.md sections 5.8 and 5.9) ----------------


class RedactionKeyError(ConfigurationError):
    """The redaction key (``RATCHET_REDACTION_KEY`` or its key file) is missing or malformed.
    The message names the variable or file, never key text."""

    default_message = "the redaction key is missing or malformed"
    hint = ("set RATCHET_REDACTION_KEY=KEY_ID:BASE64 (at least 32 random bytes) or remove the broken "
            "redaction key file so a fresh one is created")


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


# --- receipts ledger (DESIGN.md section 3.1) ---------------------------------------------------


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


class LedgerUnavailableError(CheckpointError):
    """A state whose checkpoint commits to a non-empty ledger has no ledger attached to read it."""

    default_message = "the run state has no readable receipts ledger"
    hint = "restore the run through `checkpoint_restore`, which attaches its ledger"


class SqlCredentialRejectedError(AdapterError):
    """The SQL target refused the adapter's login (a revoked role, an expired password): no retry
    can fix that, so a resume freezes the run before anything executes (DESIGN.md section 5.9)."""

    default_message = "the SQL target database refused the adapter's credential"
    hint = "renew the credential behind options.url_env (or the role's LOGIN) and let a reviewer resume the run"


class VerifierCommandError(PluginError):
    """The command verifier could not give a verdict (DESIGN.md section 6.5): its command did not
    run, or did not finish. Not a failed verdict: the run is frozen for review (stop reason
    ``verifier_error``) and nothing is executed."""

    default_message = "the verifier's command could not give a verdict"
    hint = ("read the command's output attachment in the review case, fix the task spec or the "
            "environment, then replan or abort")


class VerifierCommandNotFoundError(VerifierCommandError):
    """The verifier's executable does not exist, or is not executable, on the worker's PATH."""

    default_message = "the verifier's command does not exist"
    hint = ("install the executable on the worker, or name it by absolute path in verifier.argv, "
            "then let a reviewer replan the run (the verifier runs again)")


class VerifierCommandTimeoutError(VerifierCommandError):
    """The verifier's command ran past ``verifier.timeout_seconds``; its whole process group was
    killed (SIGKILL) and the output so far is attached by digest (``output_digest``)."""

    default_message = "the verifier's command timed out"
    hint = ("read the partial output attachment; raise verifier.timeout_seconds or fix the hanging "
            "test, then let a reviewer replan the run, or abort it")


class VerifierWorkdirError(VerifierCommandError):
    """The verifier's working directory is outside the run's environment and every directory
    ``verifier.allowed_workdirs`` lists (after resolving symlinks), or does not exist."""

    default_message = "the verifier's working directory is not allowed"
    hint = ("use a directory inside the environment target (verifier.workdir, relative) or list "
            "it in verifier.allowed_workdirs")


# --- version combinations and regression fixtures (DESIGN.md sections 8.4 and 8.5) ---------


class CodeDigestMismatchError(PluginVersionMismatchError):
    """A worker's plug-in code (source digest) differs from the code the run was pinned to, with
    the same entry and version: the worker refuses to advance the run instead of executing it
    under different code (DESIGN.md section 8.4). Context: ``run_id``, ``role``."""

    default_message = "this worker's plug-in code differs from the run's pinned combination"
    hint = ("resume the run on a worker of its pinned combination (`manage.py worker --combinations ID`); "
            "a retry on this worker does not help")


class CombinationError(RatchetError):
    """A version combination service refused (DESIGN.md section 8.4). Context:
    ``combination_id`` (a digest, never a key)."""

    default_message = "version combination error"
    hint = "`manage.py combinations show ID` lists its state and history"


class CombinationNotFoundError(CombinationError):
    """No registered combination has this id (or id prefix)."""

    default_message = "no such version combination"
    hint = "`manage.py combinations list` shows the registered ones"


class CombinationStateError(CombinationError):
    """The combination is not in a state that allows this change (e.g. promoting a retired one,
    promoting a canary whose metrics do not hold or that has no passing regress record)."""

    default_message = "the combination cannot change state this way"
    hint = ("the message names the rule; run `manage.py regress ID` or wait for more canary runs, "
            "then promote again")


class PasskeyError(RatchetError):
    """A reviewer's passkey ceremony failed: registration or a decision assertion did not verify
    (wrong origin or relying party, another challenge, an unknown credential, a sign count that
    did not go up, no user verification) or expired from the session (DESIGN.md section 6.9).
    Context: ``reviewer``, ``case_id``; never key material."""

    default_message = "the passkey did not verify"
    hint = ("reload the page and try again with a passkey registered to you (Passkeys page); a "
            "sign count that went down means a cloned authenticator: remove that passkey")
