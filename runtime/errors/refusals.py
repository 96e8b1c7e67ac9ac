"""Refusals by the runtime's own rules: the policy, the run state machine, exactly-once keys,
approvals and reviewer decisions, passkeys, run lifecycle, the admission gate, version
combinations.

Each sits under :class:`~runtime.errors.base.RefusedError`: nothing was changed, and the message
names the rule. The gateway's refusals, which also carry an HTTP status, are in
``runtime/errors/gateway.py``.
"""

from __future__ import annotations

from runtime.errors.base import RefusedError

# --- the policy and the run state machine (DESIGN.md sections 3 and 6.1) --------------------


class PolicyViolationError(RefusedError):
    """An action's kind or a path it touches is outside the run's allowed scope (DESIGN.md section 3)."""

    default_message = "action is outside the policy's allowed scope"
    hint = "the action is not executed; replan, or widen the policy in a new policy version"


class IllegalTransitionError(RefusedError):
    """An event that the run state machine (DESIGN.md section 6.1) does not allow in this phase.

    Context: ``phase``, ``event`` and, when the caller knows it, ``run_id``. Terminal phases
    accept no event at all.
    """

    default_message = "event is not allowed in the run's current phase"
    hint = "the run's phase changed under this caller or a step was skipped; re-read the run"


# --- exactly-once keys (DESIGN.md sections 5.1 and 5.2) -------------------------------------


class ReceiptConflictError(RefusedError):
    """The idempotency key is already bound to another intent or receipt in the runtime's cache.
    Context: ``run_id``, ``idempotency_key``, ``cached_intent``, ``offered_intent``."""

    default_message = "idempotency key is already bound to a different intent or receipt"
    hint = "the run freezes for review; a reviewer decides replan or abort"


class KeyQuarantinedError(RefusedError):
    default_message = "idempotency key is quarantined and can never be used again"
    hint = "a reviewer's replan retired this key; the run continues with a new one"


# --- runs: creating and discarding ----------------------------------------------------------


class RunExistsError(RefusedError):
    default_message = "a run with this id already exists"
    hint = "run ids are unique; resume the existing run instead of creating it again"


class RunArchivedError(RefusedError):
    """The run was archived (DESIGN.md section 4.11): its checkpoints, trace and receipts live in
    its signed evidence bundle now (``location``, ``digest``), so nothing can drive or restore it."""

    default_message = "the run was archived; nothing drives an archived run"
    hint = "read its evidence with `manage.py archive --verify RUN_ID`; start a new run to do the work again"


class RunArchiveRefusedError(RefusedError):
    """A run was not archived because it is not (or no longer) archivable: it is unfinished,
    already archived, has an open review case, a live run acts on its environment, or it changed
    after its bundle was exported (DESIGN.md section 4.11). Nothing was removed."""

    default_message = "refusing to archive this run"
    hint = "a later `manage.py archive --apply` takes it once it is finished and nothing live needs it"


class RunDiscardRefusedError(RefusedError):
    """An operator asked to discard a run that is not half-created: it committed a checkpoint
    (or may have: its high-water mark is unreadable), or it holds receipts or review cases.
    Such a run is evidence and is never deleted; retrying cannot help."""

    default_message = "refusing to discard a run that is not half-created"
    hint = ("only a run that died before its first checkpoint can be discarded; resume, cancel or "
            "review this one instead")


class RunResumeRefusedError(RefusedError):
    """An operator asked to resume a run that is not stopped for an infrastructure reason, or whose
    cause is still there (a plug-in still missing, a store still unreachable): nothing was queued
    (DESIGN.md section 6.12)."""

    default_message = "refusing to resume the run"
    hint = ("fix what the message names (install the plug-in, bring the store back) and ask again; a run "
            "frozen for review is decided on its case instead")


class RunAgainRefusedError(RefusedError):
    """An operator asked to run again a run that did not end failed or cancelled, or whose stored
    spec cannot start a run any more: nothing was created (DESIGN.md section 6.12)."""

    default_message = "refusing to run the run again"
    hint = "only a failed or cancelled run can be run again; start a new run from its task spec otherwise"


# --- approvals, reviewer decisions, passkeys (DESIGN.md sections 6.2, 6.3 and 6.9) ------------


class ApprovalRefusedError(RefusedError):
    default_message = "approval refused"
    hint = "look at the run again: the pending action or its environment is not what was approved"


class ApprovalTtlError(ApprovalRefusedError, ValueError):
    """An approval validity that is not a finite number of seconds in ``(0, max]`` (DESIGN.md
    section 6.2). Also a ``ValueError`` because ``approval_sign`` raised that before."""

    default_message = "approval validity is not a finite number of seconds within the configured maximum"
    hint = "pass a positive number of seconds (--ttl) no larger than RATCHET_APPROVAL_MAX_SECONDS"
    retryable = False


class AmendmentRefusedError(ApprovalRefusedError):
    """An approver's amendment of a waiting write was refused; the original still waits
    (DESIGN.md section 6.13)."""

    default_message = "amendment refused: the original action still waits for an approval"
    hint = "look at the waiting action again; amend it within the run's policy, or approve or deny it as proposed"
    retryable = False


class AmendmentPolicyError(AmendmentRefusedError):
    """The amended arguments break the run's policy or the adapter's own checks (a path outside
    ``allowed_paths``, an action kind the policy does not allow, content too large, a target the
    adapter refuses); nothing changed (DESIGN.md section 6.13)."""

    default_message = "the amended action is outside the run's policy"
    hint = "change the arguments so they stay within the policy the run was started with (paths, sizes, kinds)"


class DecisionRefusedError(RefusedError):
    default_message = "reviewer decision refused: the run stays frozen"
    hint = "the refusal is in the run's trace; look at the case again and sign a fresh decision"


class DecisionExpiredError(DecisionRefusedError):
    """A signed decision used after its signed ``expires_at`` (or without one) by the database
    clock (DESIGN.md section 6.3); the run stays frozen and the refusal is traced."""

    default_message = "reviewer decision expired: the run stays frozen"
    hint = "sign a fresh decision (it is valid for RATCHET_DECISION_SECONDS by the database clock)"


class PasskeyError(RefusedError):
    """A reviewer's passkey ceremony failed: registration or a decision assertion did not verify
    (wrong origin or relying party, another challenge, an unknown credential, a sign count that
    did not go up, no user verification) or expired from the session (DESIGN.md section 6.9).
    Context: ``reviewer``, ``case_id``; never key material."""

    default_message = "the passkey did not verify"
    hint = ("reload the page and try again with a passkey registered to you (Passkeys page); a "
            "sign count that went down means a cloned authenticator: remove that passkey")


# --- the admission gate (DESIGN.md section 8.3) ---------------------------------------------


class AdmissionClosedError(RefusedError):
    """New runs of a tenant and task are refused: a rollout metric crossed its threshold over the
    sliding window (DESIGN.md section 8.3). Context: ``tenant_id``, ``task_id``, ``metric``,
    ``value``, ``threshold``, ``window_seconds``. Runs in flight are not affected."""

    default_message = "admission is closed for this tenant and task"
    hint = ("runs in flight continue; check the runs with unresolved side effects one by one, then an "
            "admin re-opens admission with `manage.py admission reopen TENANT TASK --by NAME --reason ...`")


class AdmissionScopeUnknownError(RefusedError):
    """No run, metric counter, threshold override or earlier decision names this tenant and task,
    so a re-open decision would be about nothing (a misspelt scope; DESIGN.md section 8.3).
    Context: ``tenant_id``, ``task_id``."""

    default_message = "no such admission scope"
    hint = "`manage.py admission status` lists every known scope; check the tenant and task spelling"


class AdmissionThresholdError(RefusedError):
    """An admission threshold change was refused: an unknown threshold name, a value outside its
    range, no reason or no changer given, or a scope of the wrong shape (DESIGN.md section 8.3).
    Context: ``tenant_id``, ``task_id``, ``name``."""

    default_message = "the admission threshold change is refused"
    hint = "the message names the rule; rates are 0..1, counts whole numbers >= 0, seconds > 0"


# --- version combinations (DESIGN.md section 8.4) -------------------------------------------


class CombinationError(RefusedError):
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
