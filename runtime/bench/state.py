"""A realistic checkpointed run state: what the checkpoint and trace benchmarks write."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from runtime.core.canonical import DigestKind, digest, digest_bytes
from runtime.core.checkpoint import (
    Action,
    BudgetLimits,
    BudgetUsage,
    EnvironmentRef,
    ExecutedWrite,
    PendingAction,
    Phase,
    Receipt,
    Risk,
    RunIdentity,
    RunState,
    Scope,
    VersionSet,
)
from runtime.core.idempotency import derive_key
from runtime.planners.git_history.replay_state import replay_state


def _sha(*parts: object) -> str:
    """A deterministic 40-hex stand-in for a git object id."""
    return hashlib.sha1(":".join(map(str, parts)).encode(), usedforsecurity=False).hexdigest()


def _commit_action(run_id: str, cursor: int) -> Action:
    """A commit action shaped like the git-history planner's: message, author, five changes."""
    changes: list[Any] = [{"op": "delete", "path": f"src/old_{cursor:04d}.py"}]
    changes += [{"op": "write", "path": f"src/pkg_{cursor % 7}/module_{cursor:04d}_{i}.py",
                 "content": digest_bytes(f"{run_id}:{cursor}:{i}".encode()),
                 "executable": i == 3} for i in range(4)]
    return Action(kind="commit", target="", risk=Risk.LOW, params={
        "message": f"Change {cursor}: rework module {cursor % 7}\n\nLonger explanation of why the "
                   f"change was made, wrapped at seventy-two columns as usual.\n",
        "author_name": "Ada Lovelace",
        "author_email": "ada@example.org",
        "author_date": (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=cursor)).isoformat(),
        "changes": changes,
    })


def _instance(run_id: str) -> str:
    return f"git-{_sha(run_id, 'instance')[:16]}"


def _head(run_id: str, n: int) -> str:
    return _sha(run_id, "commit", n)


def realistic_write(*, run_id: str, cursor: int) -> ExecutedWrite:
    """The executed write a git-history replay records at ``cursor``: a commit action's key and
    intent, and a full git receipt (namespace, adapter version, commit id, tree, parent,
    fencing token, commit time) with its fingerprint -- one receipts-ledger entry."""
    action = _commit_action(run_id, cursor)
    key = derive_key(run_id=run_id, cursor=cursor, replan_epoch=0)
    receipt = Receipt(
        namespace=f"git:{_instance(run_id)}", adapter_version="ratchet-git/1",
        receipt_id=_head(run_id, cursor + 1),
        idempotency_key=key, intent_digest=action.intent_digest(),
        result={"commit": _head(run_id, cursor + 1), "tree": _sha(run_id, "tree", cursor),
                "parent": _head(run_id, cursor)},
        environment_version_after=_head(run_id, cursor + 1), fencing_token=1,
        committed_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=cursor),
        business_object=_head(run_id, cursor + 1),
    )
    return ExecutedWrite(idempotency_key=key, intent_digest=receipt.intent_digest, cursor=cursor,
                         receipt=receipt, receipt_fingerprint=receipt.fingerprint(),
                         result_summary="commit")


def realistic_state(*, executed: int = 30, run_id: str | None = None) -> RunState:
    """A valid ``pending`` run state shaped like a git-history replay after ``executed`` writes.

    It holds a pending commit action with its pre-state and expected post-state fingerprint, a
    pinned plan of ``executed + 1`` commits in the planner state (by count and digest), and an environment reference
    with two attachment digests -- what a real checkpoint carries (DESIGN.md section 3). The
    executed writes themselves belong in the run's receipts ledger (DESIGN.md section 3.1): the
    caller records :func:`realistic_write` for cursors ``0 .. executed - 1`` there.

    Args:
        executed: number of executed writes before the pending one (>= 0).
        run_id: the run id (default: a fresh uuid4 hex).
    """
    run_id = run_id or uuid.uuid4().hex
    instance = _instance(run_id)
    heads = [_head(run_id, i) for i in range(executed + 1)]
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def env_ref(version: str, n: int) -> EnvironmentRef:
        return EnvironmentRef(
            adapter_kind="git", instance_id=instance, version=version,
            state_fingerprint=digest(DigestKind.ENVIRONMENT, {"head": version}),
            adapter_generation=1, observation_version=n,
            attachments=[digest_bytes(f"{version}:{k}".encode()) for k in ("listing", "status")],
        )

    environment = env_ref(heads[executed], executed + 1)
    action = _commit_action(run_id, executed)
    pending = PendingAction(
        action=action, intent_digest=action.intent_digest(),
        idempotency_key=derive_key(run_id=run_id, cursor=executed, replan_epoch=0),
        cursor=executed, replan_epoch=0, pre_state=environment.model_copy(deep=True),
        expected_post_fingerprint=digest(DigestKind.ENVIRONMENT, {"after": executed}),
        proposed_at=start + timedelta(seconds=executed),
    )
    plan = [_sha(run_id, "source", i) for i in range(executed + 1)]
    return RunState(
        identity=RunIdentity(
            run_id=run_id, tenant_id="bench", task_id="bench-checkpoint", task_version="1",
            policy_id="bench-replay", policy_version="1",
            scenario_fingerprint=digest(DigestKind.SCENARIO, {"bench": run_id}),
        ),
        versions=VersionSet(model="none", prompt="none", rules="replay-v1",
                            tool_schema="git-commit-v1"),
        phase=Phase.PENDING,
        cursor=executed,
        limits=BudgetLimits(proposals=executed + 10, steps=executed + 10, wall_seconds=3600.0,
                            cost_micros=0),
        usage=BudgetUsage(proposals=executed + 1, steps=executed, wall_seconds=12.5),
        environment=environment,
        pending=pending,
        scope=Scope(allowed_actions=["commit"], allowed_paths=["**"], permissions=["git.commit"],
                    approval_risks=[Risk.HIGH], principal="agent@bench", policy_version="1"),
        planner_state=replay_state(source=Path("../source"), range_=f"last:{executed + 1}",
                                   base=_sha(run_id, "base"), tip=plan[-1], commits=list(plan)),
        started_at=start,
    )
