"""The runtime's exception tree: one root, nine category bases, the concrete errors by module.

Every error says what failed (``message``), which thing failed (``context``: run id, generation,
key id, idempotency key ... -- never a key or token value; values under secret names are
redacted), what the operator can do (``hint``), whether the same call can succeed later
(``retryable``) and its ``category``. Errors pickle as class, message and context, so they
survive a process boundary (a Celery task, a child process). See
:class:`~runtime.errors.base.RatchetError`.

The tree (a category base, then the module holding the errors under it)::

    RatchetError                      base.py: the root and the category bases below
    |-- ConfigurationError            configuration.py: fix a setting and restart
    |     keyrings and keys (KeyringError, WrongTrustRootError), the redaction key,
    |     the dashboard's roles, crash points, tracing (TelemetrySetupError)
    |-- InvalidInputError             inputs.py: correct the input; the same input fails again
    |     canonical JSON, digests, nesting depth, task specs (TaskSpecError), run and case
    |     ids that name nothing (RunNotFoundError, ReviewCaseNotFoundError)
    |-- EvidenceError                 fail closed; the records are kept as found
    |     checkpoints.py: CheckpointError (schema, identity, versions, the high-water mark,
    |                     StaleGenerationError, the receipts ledger)
    |     evidence.py:    SigningError, TraceChainError, AttachmentError, BundleError,
    |                     RunSpecMissingError
    |-- LeaseError                    ownership.py: another worker owns the run (lease, fencing)
    |-- AdapterError                  adapters.py: an environment refused or failed a call
    |     any adapter (InvalidActionError, PreconditionFailedError, AdapterTimeoutError ...),
    |     SQL targets (Sql*), HTTP services (Http*)
    |-- ComponentError                a planner, verifier or plug-in failed; nothing executed
    |     planners.py: PlannerError (planner state, git replay, the chat-tools model: Model*)
    |     plugins.py:  PluginError (loading, pinned versions, the command verifier),
    |                  VerifierError (the verifier's reference is unreachable: retryable)
    |-- RefusedError                  a rule refuses the request; nothing was changed
    |     gateway.py:  GatewayError (each with a stable ``code`` and HTTP ``status``)
    |     refusals.py: the policy, the run state machine, exactly-once keys, approvals,
    |                  reviewer decisions, passkeys, run lifecycle, admission, combinations
    |-- OperatorCommandError          commands.py: ``manage.py bench``, ``chaos``, ``demo``
    `-- EngineError                   base.py: an internal error; report it with the run id

A few errors are also a builtin ``ValueError`` (``NestingTooDeepError``, ``UnknownDigestKindError``,
``WrongTrustRootError``, ``ApprovalTtlError``) because callers caught that before they existed;
``PluginNotFoundError`` and ``PluginLoadError`` are also ``TaskSpecError``.

Adding an error: choose the category by what the operator does about it, put the class in that
category's module (under the nearest existing base there), give it a ``default_message``, a
``hint`` and, if a retry can help, ``retryable = True``, and add its name to the imports and
``__all__`` below. Submodules import from ``runtime.errors.base`` or a sibling module, never from
this package (that would be an import circle). ``tests/runtime/test_error_tree.py`` checks the
shape: at most nine categories under the root, a category for every error, a hint and a boolean
``retryable`` on each, a pickle round trip, no name defined twice.

Nothing in this package imports Django: the framework-free core raises these errors.
"""

from __future__ import annotations

from runtime.errors.adapters import (
    AdapterBusyError,
    AdapterCommandError,
    AdapterStoreCorruptError,
    AdapterTargetError,
    AdapterTimeoutError,
    BlobDigestMismatchError,
    BlobUnavailableError,
    CommitDeadlinePassedError,
    ConcurrentWriteError,
    DuplicateReceiptError,
    EnvironmentIdentityError,
    HttpContractError,
    HttpCredentialExpiredError,
    HttpOutcomeUnknownError,
    HttpRequestInFlightError,
    HttpRequestNotAllowedError,
    HttpRequestRejectedError,
    HttpServiceUnavailableError,
    InvalidActionError,
    PathEscapeError,
    PreconditionFailedError,
    ReceiptIndeterminateError,
    SqlCredentialRejectedError,
    SqlParamsInvalidError,
    SqlReceiptStoreMissingError,
    SqlStatementError,
    SqlTargetUnavailableError,
    SqlTemplateNotAllowedError,
    UnknownAdapterError,
)
from runtime.errors.base import (
    CATEGORIES,
    REDACTED,
    SECRET_CONTEXT_NAMES,
    AdapterError,
    ComponentError,
    ConfigurationError,
    EngineError,
    EvidenceError,
    InvalidInputError,
    LeaseError,
    OperatorCommandError,
    RatchetError,
    RefusedError,
)
from runtime.errors.base import _rebuild as _rebuild  # pickles made before the split name runtime.errors._rebuild
from runtime.errors.checkpoints import (
    CheckpointCorruptError,
    CheckpointError,
    CheckpointInvariantError,
    CheckpointMigrationError,
    CheckpointNotFoundError,
    CheckpointSchemaError,
    DerivedRowMismatchError,
    HighWaterMarkBehindError,
    HighWaterMarkMissingError,
    IdentityMismatchError,
    LedgerChainError,
    LedgerEntryError,
    LedgerUnavailableError,
    MainDatabaseUnavailableError,
    MarkPendingError,
    MarkStoreUnavailableError,
    RollbackError,
    ScenarioMismatchError,
    StaleGenerationError,
    StorageUnavailableError,
    VersionMismatchError,
)
from runtime.errors.commands import (
    BenchmarkError,
    BenchmarkScratchError,
    ChaosSetupError,
    DemoLaunchError,
    DemoSetupError,
)
from runtime.errors.configuration import (
    CrashPointError,
    KeyringError,
    RedactionKeyError,
    RoleSetupError,
    TelemetrySetupError,
    WrongTrustRootError,
)
from runtime.errors.evidence import (
    ArchiveStorageError,
    AttachmentError,
    BadSignatureError,
    BundleError,
    BundleExportError,
    BundleFormatError,
    RunSpecMissingError,
    SigningError,
    TraceChainError,
    UnknownKeyError,
)
from runtime.errors.gateway import (
    GatewayCallConflictError,
    GatewayCallLimitError,
    GatewayError,
    GatewayInputError,
    GatewayMalformedRequestError,
    GatewayNotFoundError,
    GatewayPayloadTooLargeError,
    GatewayPolicyRefusedError,
    GatewayRateLimitedError,
    GatewayRunBusyError,
    GatewayRunsNotEnabledError,
    GatewayRunStoppedError,
    GatewayScopeError,
    GatewayTokenError,
    GatewayTokenMissingError,
    GatewayTokenScopeInvalidError,
    GatewayUnknownActionError,
    GatewayWaitingForApprovalError,
)
from runtime.errors.inputs import (
    CanonicalizationError,
    DigestFormatError,
    NestingTooDeepError,
    NotificationEndpointError,
    PolicyActionsError,
    ReviewCaseNotFoundError,
    RunNotFoundError,
    TaskSpecError,
    TaskSpecUnreadableError,
    UnknownDigestKindError,
)
from runtime.errors.ownership import (
    FencingTokenError,
    LeaseHeldError,
    LeaseLostError,
)
from runtime.errors.planners import (
    GitReplayError,
    GitReplayUnsupportedError,
    MalformedModelReplyError,
    ModelAuthError,
    ModelBudgetExhaustedError,
    ModelPinMismatchError,
    ModelRateLimitedError,
    ModelRefusalError,
    ModelReplyError,
    ModelReplyMissingError,
    ModelTimeoutError,
    ModelUnavailableError,
    PlannerError,
    PlannerStateError,
    PlannerStateTooLargeError,
    ReplayTargetNotEmptyError,
    ToolArgumentsError,
    UnknownToolError,
)
from runtime.errors.plugins import (
    CodeClosureMismatchError,
    CodeDigestMismatchError,
    PluginConstructionError,
    PluginError,
    PluginFailedError,
    PluginLoadError,
    PluginNotFoundError,
    PluginVersionMismatchError,
    VerifierCommandError,
    VerifierCommandNotFoundError,
    VerifierCommandTimeoutError,
    VerifierError,
    VerifierWorkdirError,
)
from runtime.errors.refusals import (
    AdmissionClosedError,
    AdmissionScopeUnknownError,
    AdmissionThresholdError,
    AmendmentPolicyError,
    AmendmentRefusedError,
    ApprovalRefusedError,
    ApprovalTtlError,
    CombinationError,
    CombinationNotFoundError,
    CombinationStateError,
    DecisionExpiredError,
    DecisionRefusedError,
    IllegalTransitionError,
    KeyQuarantinedError,
    PasskeyError,
    PolicyViolationError,
    ReceiptConflictError,
    RunAgainRefusedError,
    RunArchivedError,
    RunArchiveRefusedError,
    RunDiscardRefusedError,
    RunExistsError,
    RunResumeRefusedError,
)

__all__ = (
    "AdapterBusyError", "AdapterCommandError", "AdapterError", "AdapterStoreCorruptError", "AdapterTargetError",
    "DerivedRowMismatchError",
    "AdapterTimeoutError", "AdmissionClosedError", "AdmissionScopeUnknownError", "AdmissionThresholdError",
    "AmendmentPolicyError", "AmendmentRefusedError",
    "ApprovalRefusedError", "ApprovalTtlError", "AttachmentError", "BadSignatureError", "BenchmarkError",
    "BenchmarkScratchError", "BlobDigestMismatchError", "BlobUnavailableError", "BundleError", "BundleExportError",
    "ArchiveStorageError",
    "BundleFormatError", "CATEGORIES", "CanonicalizationError", "ChaosSetupError", "CheckpointCorruptError",
    "CheckpointError", "CheckpointInvariantError", "CheckpointMigrationError", "CheckpointNotFoundError",
    "CheckpointSchemaError", "CodeClosureMismatchError", "CodeDigestMismatchError", "CombinationError",
    "CombinationNotFoundError",
    "CombinationStateError", "CommitDeadlinePassedError", "ComponentError", "ConcurrentWriteError",
    "ConfigurationError", "CrashPointError", "DecisionExpiredError", "DecisionRefusedError", "DemoLaunchError",
    "DemoSetupError", "DigestFormatError", "DuplicateReceiptError", "EngineError", "EnvironmentIdentityError",
    "EvidenceError", "FencingTokenError", "GatewayCallConflictError", "GatewayCallLimitError", "GatewayError",
    "GatewayInputError", "GatewayMalformedRequestError", "GatewayNotFoundError", "GatewayPayloadTooLargeError",
    "GatewayPolicyRefusedError", "GatewayRateLimitedError",
    "GatewayRunBusyError", "GatewayRunStoppedError", "GatewayScopeError", "GatewayTokenError",
    "GatewayWaitingForApprovalError", "GatewayRunsNotEnabledError",
    "GatewayTokenMissingError", "GatewayTokenScopeInvalidError", "GatewayUnknownActionError", "GitReplayError",
    "GitReplayUnsupportedError", "HighWaterMarkBehindError", "HighWaterMarkMissingError", "HttpContractError",
    "HttpCredentialExpiredError", "HttpOutcomeUnknownError", "HttpRequestInFlightError",
    "HttpRequestNotAllowedError", "HttpRequestRejectedError", "HttpServiceUnavailableError",
    "IdentityMismatchError", "IllegalTransitionError", "InvalidActionError", "InvalidInputError",
    "KeyQuarantinedError", "KeyringError", "LeaseError", "LeaseHeldError", "LeaseLostError", "LedgerChainError",
    "LedgerEntryError", "LedgerUnavailableError", "MainDatabaseUnavailableError",
    "MalformedModelReplyError", "MarkPendingError", "MarkStoreUnavailableError", "ModelAuthError",
    "ModelBudgetExhaustedError", "ModelPinMismatchError", "ModelRateLimitedError", "ModelRefusalError",
    "ModelReplyError", "ModelReplyMissingError", "ModelTimeoutError", "ModelUnavailableError",
    "NestingTooDeepError", "NotificationEndpointError", "OperatorCommandError", "PasskeyError", "PathEscapeError",
    "PlannerError",
    "PlannerStateError", "PlannerStateTooLargeError", "PluginConstructionError", "PluginError", "PluginFailedError",
    "PluginLoadError", "PluginNotFoundError", "PluginVersionMismatchError", "PolicyActionsError",
    "PolicyViolationError", "PreconditionFailedError", "REDACTED", "RatchetError", "ReceiptConflictError",
    "ReceiptIndeterminateError", "RedactionKeyError", "RefusedError", "ReplayTargetNotEmptyError",
    "ReviewCaseNotFoundError", "RoleSetupError", "RollbackError", "RunArchivedError", "RunArchiveRefusedError",
    "RunAgainRefusedError", "RunDiscardRefusedError", "RunExistsError", "RunResumeRefusedError",
    "RunNotFoundError", "RunSpecMissingError", "SECRET_CONTEXT_NAMES", "ScenarioMismatchError", "SigningError",
    "SqlCredentialRejectedError", "SqlParamsInvalidError", "SqlReceiptStoreMissingError", "SqlStatementError",
    "SqlTargetUnavailableError", "SqlTemplateNotAllowedError", "StaleGenerationError", "StorageUnavailableError",
    "TaskSpecError", "TaskSpecUnreadableError",
    "TelemetrySetupError",
    "ToolArgumentsError", "TraceChainError", "UnknownAdapterError", "UnknownDigestKindError", "UnknownKeyError",
    "UnknownToolError", "VerifierCommandError", "VerifierCommandNotFoundError", "VerifierCommandTimeoutError",
    "VerifierError", "VerifierWorkdirError", "VersionMismatchError", "WrongTrustRootError",
)
