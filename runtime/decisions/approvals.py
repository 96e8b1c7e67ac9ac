"""Approvals: grant and refresh the write a run waits on, and the queue of such runs (DESIGN.md section 6).

A write whose risk the policy lists in ``approval_risks`` waits in ``awaiting_approval`` with its
intent frozen and a dry-run diff attached. Approval evidence is signed under the approval trust
root and bound to the run, idempotency key, intent digest and the environment instance,
fingerprint and version the approver saw. Expired evidence still loads (expiry is not
corruption) but never authorises execution; *refresh* issues fresh evidence bound to the current
environment and seals the old one into the trace. If the adapter already holds a receipt for the
key (the write committed before a crash), approving only reconciles.

Who may replace evidence is decided here, not by the caller: approving a write that already
carries (expired) evidence replaces it, which is a refresh, so ``approval_grant`` refuses it
unless the caller says the approver may refresh (``may_refresh``). The rule is checked inside
the run's session, on the same restored checkpoint the new evidence is signed over and committed
from, so no other session can add or remove evidence between the check and the grant, and one
call restores the checkpoint once (DESIGN.md section 6.6).

The checks the engine applies to approval evidence and to receipts of approval-gated writes
(``approval_problem``, ``receipt_trust_problem``, ``evidence_verify``) are
``runtime.checkpoints.approval_checks``; this module holds the services people call. Denials
are ``runtime.decisions.denials``, several decisions at once ``runtime.decisions.batch``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

import runtime.workers.dispatch
from runtime.adapters.base import Observation
from runtime.checkpoints.protocol import checkpoint_verify
from runtime.checkpoints.session import RunSession, person_worker_id, run_session, session_commit
from runtime.core.checkpoint import PendingAction, Phase, Receipt
from runtime.core.evidence import approval_sign, approval_ttl_check
from runtime.core.signing import TrustRoot
from runtime.core.statemachine import Event, transition
from runtime.database.clock import db_now
from runtime.engine.approval_reasons import approval_reasons_recorded, approval_rule_text, asked_by_text
from runtime.engine.settle import receipt_settle
from runtime.errors import ApprovalRefusedError, LeaseHeldError, RatchetError
from runtime.evidence.attachments import attachment_get
from runtime.evidence.trace import trace_append
from runtime.keys import signer_for
from runtime.models import Run, TraceEvent


@dataclass(frozen=True)
class ApprovalOutcome:
    """What an approval call did: ``granted``, ``refreshed`` or ``reconciled`` (write already done)."""

    run_id: str
    outcome: str
    approval_id: str | None
    expires_at: datetime | None
    phase: str


REFRESH_NEEDED = ("the write already has an approval (it has expired); replacing it is a refresh, which "
                  "this approver may not do: ask someone with the refresh permission")


def _approval_ttl(ttl_seconds: float | None) -> float:
    """The requested validity, checked against ``RATCHET_APPROVAL_MAX_SECONDS`` before anything
    is locked (DESIGN.md section 6.2); ApprovalTtlError otherwise."""
    ttl = ttl_seconds if ttl_seconds is not None else settings.RATCHET_APPROVAL_SECONDS
    return approval_ttl_check(ttl, max_ttl_seconds=settings.RATCHET_APPROVAL_MAX_SECONDS)


@contextmanager
def _waiting_session(*, run_id: str, approver: str, action: str
                     ) -> Iterator[tuple[RunSession, PendingAction, Receipt | None]]:
    """The run's session, checked to be waiting for an approval, with its pending write and the
    adapter's receipt for the pending key if the write already committed (before a crash): then
    callers only reconcile. The lease is held under a name of this call alone
    (``person_worker_id``), so two sessions of one approver never share it: the second waits
    for the first, then is refused with ``LeaseHeldError`` naming the holder.

    A call refused here (the lease is held, or no approval is waiting any more: another
    approver got there first) is recorded in the run's trace as ``approval.refused``, so
    every one of many approvers racing on one run is accounted for (DESIGN.md section 6.6).
    """
    try:
        with run_session(run_id=run_id, worker=person_worker_id(role="approver", person=approver)) as ctx:
            state = ctx.state
            if state.phase != Phase.AWAITING_APPROVAL or state.pending is None:
                _refusal_trace(run_id=run_id, approver=approver, action=action,
                               reason=f"the run is not waiting for an approval (phase {state.phase.value})")
                raise ApprovalRefusedError("run is not waiting for an approval", run_id=run_id,
                                           phase=state.phase.value)
            yield ctx, state.pending, ctx.adapter.lookup_receipt(state.pending.idempotency_key)
    except LeaseHeldError as exc:  # only the acquisition raises it: nothing of this call ran
        _refusal_trace(run_id=run_id, approver=approver, action=action,
                       reason=f"lease holder {exc.context.get('holder', '?')} was changing the run")
        raise


def _refusal_trace(*, run_id: str, approver: str, action: str, reason: str, **details: Any) -> None:
    """Trace ``approval.refused``: who, what they tried, why, and what the check saw (``details``).

    Also called outside the lease: an append moves the trace head, which a holder's next commit
    re-reads (runtime.checkpoints.transaction, the fence's slow path), so it disturbs nobody."""
    trace_append(run_id=run_id, event_type="approval.refused",
                 payload={"approver": approver, "action": action, "reason": reason, **details})


def approval_grant(*, run_id: str, approver: str, environment_fingerprint: str,
                   ttl_seconds: float | None = None, refresh_only: bool = False,
                   may_refresh: bool = True, intent_digest: str | None = None,
                   comment: str | None = None) -> ApprovalOutcome:
    """Approve (or refresh the approval of) the write a run is waiting on.

    Args:
        run_id: a run in ``awaiting_approval``.
        approver: the approving person's identity (lands in the evidence and the trace).
        environment_fingerprint: the fingerprint the approver looked at; it must still be current.
        ttl_seconds: validity of the evidence in seconds (default ``RATCHET_APPROVAL_SECONDS``,
            at most ``RATCHET_APPROVAL_MAX_SECONDS``), counted from the database clock.
        refresh_only: require existing (expired) evidence, i.e. this is a refresh.
        may_refresh: whether the approver may replace existing evidence (the dashboard passes
            the user's refresh permission; DESIGN.md section 6.6). ``False`` refuses a grant over
            existing evidence, decided on the state this call restored and signs over.
        intent_digest: the intent digest the approver looked at (a batch passes each item's;
            DESIGN.md section 6.15); None: not compared.
        comment: an optional comment, signed into the evidence and traced (at most 2,000 characters).

    Returns:
        :class:`ApprovalOutcome`; ``reconciled`` when the adapter already holds the write's receipt.

    Raises:
        ApprovalTtlError: ``ttl_seconds`` is not finite, not positive or above the maximum.
        KeyringError: this process holds no private approval key (only the approval service signs;
            DESIGN.md section 4.1).
        ApprovalRefusedError: the run is not waiting, the environment changed since the approver
            looked or since the intent, (refresh) there is nothing to refresh, or (``may_refresh``
            false) there is evidence to replace. The refusal is recorded in the trace.
        LeaseHeldError: a worker is busy with the run; try again shortly.
    """
    ttl = _approval_ttl(ttl_seconds)
    with _waiting_session(run_id=run_id, approver=approver,
                          action="refresh" if refresh_only else "approve") as (ctx, pending, receipt):
        if receipt is not None:
            receipt_settle(ctx, receipt, reconciled=True, fold=False)
            outcome = ApprovalOutcome(run_id, "reconciled", None, None, ctx.state.phase.value)
        else:
            outcome = _grant(ctx, pending, approver=approver, seen=environment_fingerprint,
                             ttl=ttl, refresh_only=refresh_only, may_refresh=may_refresh,
                             seen_intent=intent_digest, comment=(comment or "").strip()[:2000] or None)
    # Looked up on the module at call time, so stories can record the hand-off instead.
    runtime.workers.dispatch.run_enqueue(run_id=run_id)
    return outcome


def seen_problem(*, pending: PendingAction, obs: Observation, seen: str | None, seen_intent: str | None,
                 planned_against: bool = True) -> str | None:
    """Why a decision on ``pending`` must be refused because the approver decided on something
    else than what waits now, or None (DESIGN.md sections 6.2, 6.13 and 6.14).

    Args:
        pending: the write that waits.
        obs: the adapter's observation now.
        seen: the environment fingerprint the approver looked at (None: not compared).
        seen_intent: the intent digest the approver looked at (None: not compared).
        planned_against: also require the environment to be the state the write was planned
            against (approve and amend; a denial changes nothing, so it need not).
    """
    if seen_intent is not None and seen_intent != pending.intent_digest:
        return "the action waiting is not the one you looked at (its intent digest differs); review it again"
    if seen is not None and obs.state_fingerprint != seen:
        return "the environment changed since you looked; review the action again"
    pre = pending.pre_state
    if planned_against and (obs.instance_id, obs.state_fingerprint, obs.version) != (
            pre.instance_id, pre.state_fingerprint, pre.version):
        return "the environment no longer matches the state the action was planned against"
    return None


def observed_json(obs: Observation) -> dict[str, Any]:
    """What a refusal trace records of the environment it saw."""
    return {"instance_id": obs.instance_id, "version": obs.version, "state_fingerprint": obs.state_fingerprint}


def _grant(ctx: RunSession, pending: PendingAction, *, approver: str, seen: str, ttl: float,
           refresh_only: bool, may_refresh: bool, seen_intent: str | None = None,
           comment: str | None = None) -> ApprovalOutcome:
    state = ctx.state
    old = pending.approval
    obs = ctx.adapter.observe()

    def refuse(reason: str) -> ApprovalRefusedError:
        _refusal_trace(run_id=ctx.run_id, approver=approver, action="refresh" if refresh_only else "approve",
                       reason=reason, seen_fingerprint=seen, observed=observed_json(obs))
        return ApprovalRefusedError(reason, run_id=ctx.run_id)

    if refresh_only and old is None:
        raise refuse("there is no approval to refresh")
    if old is not None and not may_refresh:
        raise refuse(REFRESH_NEEDED)
    problem = seen_problem(pending=pending, obs=obs, seen=seen, seen_intent=seen_intent)
    if problem:
        raise refuse(problem)
    evidence = approval_sign(
        keyring=signer_for(TrustRoot.APPROVAL), run_id=ctx.run_id, idempotency_key=pending.idempotency_key,
        intent_digest=pending.intent_digest, environment_instance_id=obs.instance_id,
        environment_fingerprint=obs.state_fingerprint, environment_version=obs.version,
        approver=approver, ttl_seconds=ttl, now=db_now(),
        max_ttl_seconds=settings.RATCHET_APPROVAL_MAX_SECONDS, comment=comment,
    )
    if old is not None:
        pending.sealed_approvals.append(old)
    pending.approval = evidence
    state.phase = transition(state.phase, Event.APPROVED)
    state.stop_reason = None
    state.stop_detail = ""
    kind = "approval.refreshed" if old is not None else "approval.granted"
    session_commit(ctx, (kind, {"approver": approver, "approval": evidence.model_dump(mode="json"),
                                "sealed": old.model_dump(mode="json") if old is not None else None,
                                "idempotency_key": pending.idempotency_key, "comment": comment}))
    return ApprovalOutcome(ctx.run_id, "refreshed" if old is not None else "granted", evidence.approval_id,
                           evidence.expires_at, state.phase.value)


def approval_refresh(*, run_id: str, approver: str, environment_fingerprint: str,
                     ttl_seconds: float | None = None) -> ApprovalOutcome:
    """Refresh an expired approval: fresh evidence bound to the current environment; the old
    evidence is sealed into the trace. Same errors as :func:`approval_grant`."""
    return approval_grant(run_id=run_id, approver=approver, environment_fingerprint=environment_fingerprint,
                          ttl_seconds=ttl_seconds, refresh_only=True)


@dataclass(frozen=True)
class WaitingApproval:
    """A run waiting for an approval, as the approvals queue shows it."""

    run_id: str
    task_id: str
    idempotency_key: str
    intent_digest: str
    action: dict[str, Any]
    risk: str
    dry_run_diff: str | None
    """Attachment digest of the dry-run diff, if one was recorded."""
    environment_fingerprint: str
    environment_version: str
    approval_state: str
    """``none``, ``expired`` or ``valid``."""
    approval_expires_at: datetime | None
    stop_detail: str
    asked_by: dict[str, Any] = field(default_factory=dict)
    """Who proposed the write (``runtime.engine.approval_reasons``; DESIGN.md section 6.11)."""
    approval_rule: dict[str, Any] = field(default_factory=dict)
    """Which risk rule and policy made it wait for an approval."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def asked_by_text(self) -> str:
        """Who asked, in words."""
        return asked_by_text(self.asked_by)

    @property
    def approval_rule_text(self) -> str:
        """Which rule made the write wait, in words."""
        return approval_rule_text(self.approval_rule)


def approvals_waiting(*, run_ids: list[str] | None = None) -> list[WaitingApproval]:
    """Runs in ``awaiting_approval`` with their pending write, read from verified checkpoints.

    A run whose checkpoint fails to verify is left out of the queue (it needs forensic handling,
    not an approval); the runs list shows it.
    """
    runs = Run.objects.filter(phase=Phase.AWAITING_APPROVAL.value).order_by("updated_at")
    if run_ids is not None:
        runs = runs.filter(run_id__in=run_ids)
    ids = list(runs.values_list("run_id", flat=True))
    diffs: dict[tuple[str, str], str] = {}
    proposed: dict[tuple[str, str], dict[str, Any]] = {}
    # In trace order, so an amended action's diff (intent.amended, DESIGN.md section 6.13)
    # replaces the proposed one under the same key; who asked and why stay the proposal's.
    for run_id, event_type, payload in TraceEvent.objects.filter(
        run_id__in=ids, event_type__in=("intent.proposed", "intent.amended")
    ).order_by("run_id", "seq").values_list("run_id", "event_type", "payload"):
        key = (run_id, payload.get("idempotency_key", ""))
        if payload.get("dry_run_diff"):
            diffs[key] = payload["dry_run_diff"]
        if event_type == "intent.proposed":
            proposed[key] = payload
    out = []
    now = db_now()
    for run_id in ids:
        try:
            state = checkpoint_verify(run_id=run_id).state
        except RatchetError:
            continue
        pending = state.pending
        if pending is None:
            continue
        approval = pending.approval
        out.append(WaitingApproval(
            run_id=run_id, task_id=state.identity.task_id, idempotency_key=pending.idempotency_key,
            intent_digest=pending.intent_digest, action=pending.action.model_dump(mode="json"),
            risk=pending.action.risk.value, dry_run_diff=diffs.get((run_id, pending.idempotency_key)),
            environment_fingerprint=state.environment.state_fingerprint,
            environment_version=state.environment.version,
            approval_state="none" if approval is None else ("expired" if approval.expires_at <= now else "valid"),
            approval_expires_at=approval.expires_at if approval else None, stop_detail=state.stop_detail,
            **approval_reasons_recorded(state=state, payload=proposed.get((run_id, pending.idempotency_key))),
        ))
    return out


def approvals_waiting_json() -> list[dict[str, Any]]:
    """The approvals queue as JSON-ready objects (``manage.py approvals list --json``): each
    :class:`WaitingApproval` with ``dry_run_diff_text``, the diff itself (``""`` when none was
    recorded; an ``error`` text when its attachment fails its digest check), and the readable
    ``asked_by_text`` and ``approval_rule_text`` (DESIGN.md section 6.11)."""
    out = []
    for item in approvals_waiting():
        entry = {**item.as_dict(), "asked_by_text": item.asked_by_text, "approval_rule_text": item.approval_rule_text,
                 "dry_run_diff_text": ""}
        if item.dry_run_diff:
            try:
                entry["dry_run_diff_text"] = attachment_get(digest=item.dry_run_diff).decode("utf-8", "replace")
            except RatchetError as exc:
                entry["dry_run_diff_error"] = exc.message
        out.append(entry)
    return out
