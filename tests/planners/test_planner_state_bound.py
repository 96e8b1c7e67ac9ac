"""Story: a planner's state must be a small JSON object, because it is in every checkpoint."""

from __future__ import annotations

import pytest

from runtime.errors import PlannerStateError, PlannerStateTooLargeError
from runtime.planners.base import MAX_PLANNER_STATE_BYTES, planner_state_check


def test_it_accepts_a_state_up_to_the_limit() -> None:
    state = {"context": "x" * (MAX_PLANNER_STATE_BYTES - len('{"context":""}'))}

    assert planner_state_check(state) is state


def test_it_refuses_a_state_past_the_limit_with_a_typed_error() -> None:
    with pytest.raises(PlannerStateTooLargeError, match="store it with put_blob"):
        planner_state_check({"context": "x" * MAX_PLANNER_STATE_BYTES})


@pytest.mark.parametrize("state", [["not", "an", "object"], {"seen": {1, 2}}, {"ratio": float("nan")}])
def test_it_refuses_a_state_that_is_not_a_json_object(state: object) -> None:
    with pytest.raises(PlannerStateError):
        planner_state_check(state)
