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
