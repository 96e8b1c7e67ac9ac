"""A SQL action naming a template the spec does not allow is refused before any statement runs:
by the policy gate (its kind is not in ``allowed_actions``) and by the adapter itself (no such
template), so model-written SQL never reaches the target (DESIGN.md section 5.11)."""

from __future__ import annotations

import pytest

from runtime.core.checkpoint import Action, Scope
from runtime.errors import PolicyViolationError, SqlTemplateNotAllowedError
from runtime.taskspec.policy import policy_check
from tests.adapters.sql.support import Target, order


def _execute(target: Target, action: Action) -> None:
    target.adapter().execute(action, idempotency_key="key-1", intent_digest=action.intent_digest(),
                             fencing_token=1, blobs=lambda digest: b"")


def test_it_refuses_a_template_the_spec_does_not_name(sqlite_target: Target) -> None:
    drop = Action(kind="drop_orders", params={"sql": "DROP TABLE orders"})

    with pytest.raises(SqlTemplateNotAllowedError) as caught:
        _execute(sqlite_target, drop)

    assert "record_order" in str(caught.value)  # the operator sees what is allowed
    assert sqlite_target.sql("SELECT COUNT(*) FROM orders") == [(0,)]
    assert sqlite_target.receipt_rows() == 0


def test_it_refuses_a_sql_action_that_carries_a_target(sqlite_target: Target) -> None:
    action = order("o-1", "key-1").model_copy(update={"target": "orders; DROP TABLE orders"})

    with pytest.raises(SqlTemplateNotAllowedError):
        _execute(sqlite_target, action)

    assert sqlite_target.adapter().observe().version == "s0"


def test_it_refuses_the_template_in_the_policy_gate_before_the_adapter() -> None:
    scope = Scope(allowed_actions=["record_order"], allowed_paths=[], principal="agent", policy_version="1")

    policy_check(scope, order("o-1", "key-1"))
    with pytest.raises(PolicyViolationError):
        policy_check(scope, Action(kind="cancel_order", params={"order_id": "o-1"}))
