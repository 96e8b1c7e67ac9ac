"""Amend before approving: an approver changes a waiting write's arguments, then approves it (DESIGN.md section 6.13).

:func:`amendment_preview` shows, without changing anything, what an amendment would do: the
amended action, its intent digest and its dry-run diff. :func:`approval_amend` does it, in one
checkpoint commit under the run's lease: the amended action replaces the pending one under the
*same* idempotency key (the original never ran: the adapter's store is asked by key first), with
its own intent digest, expected post-state and dry-run diff, and approval evidence bound to the
amended intent; the trace gets ``intent.amended`` (the superseded action sealed, the signed
:class:`~runtime.core.amendment.AmendmentRecord`) and ``approval.granted``. A crash before that
commit leaves the original waiting, untouched; after it, the run is an approved pending write
like any other and the crash-window table applies to the amended action alone (DESIGN.md
section 5.3): the original can no longer execute, the amended one executes once.

Inside the policy: the amended action keeps the original's kind and risk, passes the argument
models of its kind (paths, content size), the run's policy (``allowed_actions``,
``allowed_paths``) and the adapter's own checks while it predicts the post-state and computes
the diff; anything else is an :class:`~runtime.errors.AmendmentPolicyError` and nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings

import runtime.workers.dispatch
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.session import RunSession, adapter_for_run, session_blob, session_blob_put, session_commit
from runtime.core.amendment import AMENDED_EVENT, amendment_sign
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import Action, PendingAction, Phase, RunState
from runtime.core.crashpoints import crash_point, register
from runtime.core.evidence import approval_sign
from runtime.core.signing import TrustRoot
from runtime.core.statemachine import Event, transition
from runtime.database.clock import db_now
from runtime.decisions.amend_arguments import action_arguments, arguments_to_action
from runtime.decisions.approvals import (
    REFRESH_NEEDED,
    _approval_ttl,
    _refusal_trace,
    _waiting_session,
    observed_json,
    seen_problem,
)
from runtime.engine.settle import receipt_settle
from runtime.errors import AmendmentPolicyError, AmendmentRefusedError, InvalidActionError, PolicyViolationError
from runtime.evidence.attachments import attachment_blob, attachment_put
from runtime.keys import signer_for
from runtime.models import Run
from runtime.taskspec import policy_check

CP_BEFORE_AMEND = register("decisions.before_amend_commit",
                           "amendment and its approval signed, the checkpoint replacing the original not committed")
CP_AFTER_AMEND = register("decisions.after_amend_commit",
                          "amended action and its approval committed, the run not yet handed to a worker")


@dataclass(frozen=True)
class AmendmentPreview:
    """What an amendment would do, computed without changing anything.

    Attributes:
        run_id, idempotency_key: the waiting write.
        proposed: the waiting action as JSON; ``proposed_intent_digest`` its intent.
        arguments: the arguments the preview was computed for (the proposed ones when none were given).
        amended: the action those arguments make, as JSON; ``amended_intent_digest`` its intent
            (equal to the proposed one when nothing changed).
        dry_run_diff: the adapter's dry-run diff of the amended action (text).
        environment_fingerprint: the environment the preview was computed against; the amend
            call carries it back and is refused if it moved.
    """

    run_id: str
    idempotency_key: str
    proposed: dict[str, Any]
    proposed_intent_digest: str
    arguments: dict[str, Any]
    amended: dict[str, Any]
    amended_intent_digest: str
    dry_run_diff: str
    environment_fingerprint: str

    @property
    def changed(self) -> bool:
        """Whether the arguments make another action than the proposed one."""
        return self.amended_intent_digest != self.proposed_intent_digest


@dataclass(frozen=True)
class AmendmentOutcome:
    """What :func:`approval_amend` did: ``amended`` (and approved), or ``reconciled`` when the
    original had already committed before a crash (then nothing was amended)."""

    run_id: str
    outcome: str
    amendment_id: str | None
    approval_id: str | None
    expires_at: datetime | None
    proposed_intent_digest: str
    amended_intent_digest: str | None
    phase: str


def proposed_arguments(*, run_id: str) -> tuple[PendingAction, dict[str, Any]]:
    """The waiting write of ``run_id`` and its editable arguments (read from the verified checkpoint).

    Raises:
        AmendmentRefusedError: the run is not waiting for an approval, or its content is not text.
        CheckpointError: the committed checkpoint does not verify.
    """
    _, pending = _waiting_state(run_id)
    return pending, action_arguments(pending.action, blob=attachment_blob)


def _waiting_state(run_id: str) -> tuple[RunState, PendingAction]:
    state = checkpoint_verify(run_id=run_id).state
    if state.phase != Phase.AWAITING_APPROVAL or state.pending is None:
        raise AmendmentRefusedError("the run is not waiting for an approval", run_id=run_id, phase=state.phase.value)
    return state, state.pending


def amendment_preview(*, run_id: str, arguments: Mapping[str, Any] | None = None) -> AmendmentPreview:
    """The amended action, its intent digest and dry-run diff for ``arguments``; nothing is stored.

    Args:
        run_id: a run in ``awaiting_approval``.
        arguments: the edited arguments (:func:`proposed_arguments`' shape); None: the proposed ones.

    Raises:
        AmendmentRefusedError: the run is not waiting for an approval.
        AmendmentPolicyError: the arguments are outside the run's policy or the adapter refuses them.
        AdapterError: the adapter could not be read (the diff needs it).
    """
    state, pending = _waiting_state(run_id)
    proposed = action_arguments(pending.action, blob=attachment_blob) if arguments is None else {}
    adapter = adapter_for_run(Run.objects.get(run_id=run_id))
    fresh: dict[str, bytes] = {}

    def keep(data: bytes) -> str:  # a preview stores nothing: new content stays in memory
        digest = digest_bytes(data)
        fresh[digest] = data
        return digest

    args = dict(proposed if arguments is None else arguments)
    amended = arguments_to_action(pending.action, args, put_blob=keep)
    _policy(state.scope, amended, run_id=run_id)
    blobs = lambda d: fresh[d] if d in fresh else attachment_blob(d)  # noqa: E731
    diff = _adapter_checked(lambda: adapter.dry_run_diff(amended, blobs=blobs), run_id=run_id)
    return AmendmentPreview(
        run_id=run_id, idempotency_key=pending.idempotency_key, proposed=pending.action.model_dump(mode="json"),
        proposed_intent_digest=pending.intent_digest, arguments=args, amended=amended.model_dump(mode="json"),
        amended_intent_digest=amended.intent_digest(), dry_run_diff=diff,
        environment_fingerprint=adapter.observe().state_fingerprint)


def approval_amend(*, run_id: str, approver: str, arguments: Mapping[str, Any], proposed_intent_digest: str,
                   environment_fingerprint: str, note: str = "", ttl_seconds: float | None = None,
                   may_refresh: bool = True) -> AmendmentOutcome:
    """Replace the waiting write by the action ``arguments`` make, and approve that action.

    Args:
        run_id: a run in ``awaiting_approval``.
        approver: the person amending (in the signed record, the approval and the trace).
        arguments: the edited arguments (:func:`proposed_arguments`' shape).
        proposed_intent_digest: the intent the approver saw; the amendment is refused if the
            waiting action is another one by now.
        environment_fingerprint: the fingerprint the approver saw; it must still be current.
        note: why the approver amended it (at most 500 characters); the planner is told.
        ttl_seconds: validity of the approval (as for ``approval_grant``, DESIGN.md section 6.2).
        may_refresh: whether the approver may replace existing (expired) evidence; as for
            ``approval_grant`` (DESIGN.md section 6.6), False refuses an amendment over it.

    Returns:
        :class:`AmendmentOutcome`; ``reconciled`` when the adapter already held the original's
        receipt (it committed before a crash, so there was nothing left to amend).

    Raises:
        ApprovalTtlError: ``ttl_seconds`` is not a valid validity.
        AmendmentPolicyError: the arguments are outside the run's policy or the adapter refuses them.
        ApprovalRefusedError: the run is not waiting (``AmendmentRefusedError``, a subclass, for
            the rest).
        AmendmentRefusedError: the waiting action or the environment changed since the approver
            looked, an earlier attempt of the write had an unknown
            outcome, or the arguments change nothing (approve instead). Refusals are traced.
        KeyringError: this process holds no private approval key.
        LeaseHeldError: a worker is busy with the run; try again shortly.
    """
    ttl = _approval_ttl(ttl_seconds)
    note = note.strip()[:500]
    with _waiting_session(run_id=run_id, approver=approver, action="amend") as (ctx, pending, receipt):
        if receipt is not None:
            receipt_settle(ctx, receipt, reconciled=True, fold=False)
            outcome = AmendmentOutcome(run_id, "reconciled", None, None, None, pending.intent_digest, None,
                                       ctx.state.phase.value)
        else:
            outcome = _amend(ctx, pending, approver=approver, arguments=arguments, seen_intent=proposed_intent_digest,
                             seen=environment_fingerprint, note=note, ttl=ttl, may_refresh=may_refresh)
    crash_point(CP_AFTER_AMEND)
    runtime.workers.dispatch.run_enqueue(run_id=run_id)
    return outcome


def _amend(ctx: RunSession, pending: PendingAction, *, approver: str, arguments: Mapping[str, Any],
           seen_intent: str, seen: str, note: str, ttl: float, may_refresh: bool) -> AmendmentOutcome:
    state = ctx.state
    obs = ctx.adapter.observe()

    def refuse(reason: str, error: type[AmendmentRefusedError] = AmendmentRefusedError) -> AmendmentRefusedError:
        _refusal_trace(run_id=ctx.run_id, approver=approver, action="amend", reason=reason,
                       idempotency_key=pending.idempotency_key, seen_fingerprint=seen, seen_intent=seen_intent,
                       observed=observed_json(obs))
        return error(reason, run_id=ctx.run_id)

    if pending.intent_digest != seen_intent:
        raise refuse("the waiting action is not the one you amended; review it again")
    if pending.approval is not None and not may_refresh:
        raise refuse(REFRESH_NEEDED)
    if pending.attempts:
        raise refuse("an earlier attempt of this write had an unknown outcome; it cannot be amended")
    problem = seen_problem(pending=pending, obs=obs, seen=seen, seen_intent=None)
    if problem:
        raise refuse(problem)
    try:
        amended = arguments_to_action(pending.action, arguments, put_blob=lambda data: session_blob_put(ctx, data))
        _policy(state.scope, amended, run_id=ctx.run_id)
        blobs = lambda d: session_blob(ctx, d)  # noqa: E731
        expected_post = _adapter_checked(lambda: ctx.adapter.predict_post_state(amended, blobs=blobs),
                                         run_id=ctx.run_id)
        diff = _adapter_checked(lambda: ctx.adapter.dry_run_diff(amended, blobs=blobs), run_id=ctx.run_id)
    except AmendmentPolicyError as exc:
        raise refuse(exc.message, AmendmentPolicyError) from None
    intent = amended.intent_digest()
    if intent == pending.intent_digest:
        raise refuse("the arguments are those proposed: nothing to amend (approve it instead)")
    now = db_now()
    evidence = approval_sign(
        keyring=signer_for(TrustRoot.APPROVAL), run_id=ctx.run_id, idempotency_key=pending.idempotency_key,
        intent_digest=intent, environment_instance_id=obs.instance_id, environment_fingerprint=obs.state_fingerprint,
        environment_version=obs.version, approver=approver, ttl_seconds=ttl, now=now,
        max_ttl_seconds=settings.RATCHET_APPROVAL_MAX_SECONDS)
    record = amendment_sign(
        keyring=signer_for(TrustRoot.APPROVAL), run_id=ctx.run_id, idempotency_key=pending.idempotency_key,
        cursor=pending.cursor, proposed_intent_digest=pending.intent_digest, amended_intent_digest=intent,
        approval_id=evidence.approval_id, approver=approver, amended_at=now, note=note)
    superseded = pending.model_dump(mode="json")
    state.pending = PendingAction(
        action=amended, intent_digest=intent, idempotency_key=pending.idempotency_key, cursor=pending.cursor,
        replan_epoch=pending.replan_epoch, pre_state=pending.pre_state.model_copy(deep=True),
        expected_post_fingerprint=expected_post, requires_approval=True, approval=evidence,
        proposed_at=pending.proposed_at)
    state.phase = transition(state.phase, Event.APPROVED)
    state.stop_reason = None
    state.stop_detail = ""
    payload = {"idempotency_key": pending.idempotency_key, "cursor": pending.cursor, "approver": approver,
               "note": note, "intent_digest": intent, "action": amended.model_dump(mode="json"),
               "expected_post_fingerprint": expected_post, "superseded": superseded,
               "amendment": record.model_dump(mode="json"), "approval": evidence.model_dump(mode="json"),
               "dry_run_diff": attachment_put(data=diff.encode(), content_type="text/x-diff",
                                              row_writes=ctx.within_commit)}
    crash_point(CP_BEFORE_AMEND)
    session_commit(ctx, (AMENDED_EVENT, payload),
                   ("approval.granted", {"approver": approver, "approval": evidence.model_dump(mode="json"),
                                         "sealed": None, "idempotency_key": pending.idempotency_key,
                                         "amendment_id": record.amendment_id}))
    return AmendmentOutcome(ctx.run_id, "amended", record.amendment_id, evidence.approval_id, evidence.expires_at,
                            pending.intent_digest, intent, state.phase.value)


def _policy(scope: Any, action: Action, *, run_id: str) -> None:
    try:
        policy_check(scope, action, run_id=run_id)
    except PolicyViolationError as exc:
        raise AmendmentPolicyError(f"the amended action breaks the run's policy: {exc.message}",
                                   run_id=run_id, **{k: v for k, v in exc.context.items() if k != "run_id"}) from None


def _adapter_checked(call: Any, *, run_id: str) -> Any:
    """The adapter's answer, its refusal of the action (``InvalidActionError``: a path escaping
    the target, a host or template it does not allow) turned into a policy refusal."""
    try:
        return call()
    except InvalidActionError as exc:
        raise AmendmentPolicyError(f"the adapter refuses the amended action: {exc.message}", run_id=run_id) from None
