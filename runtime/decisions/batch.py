"""Several approvals decided in one action, each on its own (DESIGN.md section 6.15).

A batch is a list of items, each naming a run and the intent digest and environment fingerprint
the approver looked at for it. Every item is decided by its own service call
(``approval_grant`` or ``approval_deny``) under its own lease, signed and bound to its own
intent digest and environment fingerprint, exactly as if decided alone: one item that is stale
(the action or the environment changed, the run stopped waiting, a worker holds it) is refused
and reported, and never blocks or silently drops the others. There is no all-or-nothing: a
batch is a convenience for the person, not a transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from runtime.core.denial_evidence import DenyMode
from runtime.decisions.approvals import _approval_ttl, approval_grant
from runtime.decisions.denials import approval_deny
from runtime.errors import ApprovalRefusedError, RatchetError, RunNotFoundError

MAX_BATCH_ITEMS = 100
"""Most items one batch decides (each restores a checkpoint and takes a lease)."""


@dataclass(frozen=True)
class BatchItem:
    """One approval of a batch as the approver saw it.

    Attributes:
        run_id: the run waiting.
        intent_digest: the waiting write's intent digest shown to the approver.
        environment_fingerprint: the environment fingerprint shown to the approver.
    """

    run_id: str
    intent_digest: str
    environment_fingerprint: str


@dataclass(frozen=True)
class BatchResult:
    """What happened to one item: ``ok`` and the outcome (``granted``, ``reconciled``,
    ``denied``, ``denied_with_feedback``) and the run's phase, or not ``ok`` with the refusal's
    error type and message (nothing was changed for that item)."""

    run_id: str
    ok: bool
    outcome: str
    phase: str | None
    error: str | None = None
    message: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def approvals_batch_decide(*, items: Sequence[BatchItem], approver: str, decision: str, reason: str = "",
                           mode: DenyMode | str = DenyMode.STOP, comment: str | None = None,
                           may_refresh: bool = False, ttl_seconds: float | None = None,
                           check: Callable[[str], None] | None = None) -> list[BatchResult]:
    """Approve or deny every item, each on its own; one result per item, in the items' order.

    Args:
        items: at most :data:`MAX_BATCH_ITEMS`; a run named twice is decided once (the later
            item is reported as a duplicate).
        approver: who decides (signed into each item's evidence).
        decision: ``"approve"`` or ``"deny"``.
        reason: the denial's reason (required to deny).
        mode: how a denial ends (``stop`` or ``continue``, DESIGN.md section 6.14).
        comment: approving: the optional comment signed into each approval.
        may_refresh: as for ``approval_grant`` (an item with expired evidence needs it).
        ttl_seconds: approving: validity of each approval.
        check: called with each run id before it is decided (the dashboard's tenant scope); the
            ``RunNotFoundError`` it raises refuses that item alone (reported as not found).

    Returns:
        One :class:`BatchResult` per item.

    Raises:
        ApprovalRefusedError: the batch itself is unusable (no items, too many, an unknown
            decision or denial mode, a denial without a reason); nothing was decided.
        ApprovalTtlError: approving with a validity over ``RATCHET_APPROVAL_MAX_SECONDS``.
    """
    if decision not in ("approve", "deny"):
        raise ApprovalRefusedError(f"unknown batch decision {decision[:20]!r} (approve or deny)")
    if not items or len(items) > MAX_BATCH_ITEMS:
        raise ApprovalRefusedError(f"a batch decides 1 to {MAX_BATCH_ITEMS} approvals, not {len(items)}")
    if decision == "deny" and not reason.strip():
        raise ApprovalRefusedError("a denial needs a reason")
    # Checked once for the whole batch, so a bad mode or validity is one refusal, not N.
    try:
        mode = DenyMode(mode)
    except ValueError:
        raise ApprovalRefusedError(f"unknown denial mode {str(mode)[:20]!r} (stop or continue)") from None
    if decision == "approve":
        ttl_seconds = _approval_ttl(ttl_seconds)
    results: list[BatchResult] = []
    seen: set[str] = set()
    for item in items:
        if item.run_id in seen:
            results.append(BatchResult(item.run_id, False, "refused", None, "DuplicateItem",
                                       "the run is named twice in the batch; it was decided once"))
            continue
        seen.add(item.run_id)
        results.append(_one(item, approver=approver, decision=decision, reason=reason, mode=mode,
                            comment=comment, may_refresh=may_refresh, ttl_seconds=ttl_seconds, check=check))
    return results


def _one(item: BatchItem, *, approver: str, decision: str, reason: str, mode: DenyMode | str,
         comment: str | None, may_refresh: bool, ttl_seconds: float | None,
         check: Callable[[str], None] | None) -> BatchResult:
    try:
        if check is not None:
            check(item.run_id)
    except RunNotFoundError:  # the caller's scope check: another tenant's run is reported as not found
        return BatchResult(item.run_id, False, "refused", None, "NotFound", "no such run is waiting")
    try:
        if decision == "approve":
            done = approval_grant(run_id=item.run_id, approver=approver,
                                  environment_fingerprint=item.environment_fingerprint,
                                  intent_digest=item.intent_digest, comment=comment, may_refresh=may_refresh,
                                  ttl_seconds=ttl_seconds)
        else:
            done = approval_deny(run_id=item.run_id, approver=approver, reason=reason, mode=mode,
                                 environment_fingerprint=item.environment_fingerprint,
                                 intent_digest=item.intent_digest)
    except RatchetError as exc:  # this item alone is refused; the others go on
        return BatchResult(item.run_id, False, "refused", None, type(exc).__name__, exc.message)
    return BatchResult(item.run_id, True, done.outcome, done.phase)
