"""The run state machine of DESIGN.md section 6, as data.

Story: the engine and the review dashboard move runs only through ``transition``. Every row of
the design's diagram is in the table, nothing else is, terminal phases accept nothing, and an
illegal move is a typed error that names the phase, the event and the run.
"""

from __future__ import annotations

import pickle

import pytest

from runtime.core.checkpoint import TERMINAL_PHASES, Phase
from runtime.core.statemachine import TRANSITIONS, Event, allowed_events, transition
from runtime.errors import IllegalTransitionError, RatchetError

DESIGN_ROWS = [
    # DESIGN.md section 6, row by row.
    (Phase.RUNNING, Event.PROPOSE_WRITE, Phase.PENDING),
    (Phase.PENDING, Event.EXECUTED, Phase.RUNNING),
    (Phase.PENDING, Event.RECONCILED, Phase.RUNNING),
    (Phase.PENDING, Event.RECEIPT_CONFLICT, Phase.NEEDS_REVIEW),
    (Phase.NEEDS_REVIEW, Event.REVIEW_REPLAN, Phase.RUNNING),
    (Phase.NEEDS_REVIEW, Event.REVIEW_ABORT, Phase.FAILED),
    (Phase.NEEDS_REVIEW, Event.REVIEW_REFUSED, Phase.NEEDS_REVIEW),
    (Phase.NEEDS_REVIEW, Event.ENVIRONMENT_DRIFT, Phase.NEEDS_REVIEW),
    # Approvals: a pending write that waits for a human, and expiry as a freeze.
    (Phase.RUNNING, Event.APPROVAL_REQUIRED, Phase.AWAITING_APPROVAL),
    (Phase.PENDING, Event.APPROVAL_REQUIRED, Phase.AWAITING_APPROVAL),
    (Phase.PENDING, Event.APPROVAL_EXPIRED, Phase.AWAITING_APPROVAL),
    (Phase.AWAITING_APPROVAL, Event.APPROVAL_EXPIRED, Phase.AWAITING_APPROVAL),
    (Phase.AWAITING_APPROVAL, Event.APPROVED, Phase.PENDING),
    (Phase.AWAITING_APPROVAL, Event.DENY, Phase.FAILED),
    (Phase.AWAITING_APPROVAL, Event.DENY_CONTINUE, Phase.RUNNING),
    (Phase.AWAITING_APPROVAL, Event.RECONCILED, Phase.RUNNING),
    # Completion and stopping.
    (Phase.RUNNING, Event.VERIFIED, Phase.COMPLETED),
    (Phase.RUNNING, Event.VERIFIER_FAILED, Phase.FAILED),
    (Phase.RUNNING, Event.BUDGET_EXHAUSTED, Phase.FAILED),
    (Phase.RUNNING, Event.POLICY_VIOLATION, Phase.FAILED),
    (Phase.PENDING, Event.OUTCOME_UNKNOWN, Phase.NEEDS_REVIEW),
    (Phase.PENDING, Event.RECEIPT_DRIFT, Phase.NEEDS_REVIEW),
    (Phase.RUNNING, Event.ENVIRONMENT_DRIFT, Phase.NEEDS_REVIEW),
]


@pytest.mark.parametrize(("phase", "event", "expected"), DESIGN_ROWS)
def test_it_follows_the_design_table(phase, event, expected):
    assert transition(phase, event) is expected
    assert event in allowed_events(phase)


@pytest.mark.parametrize("phase", sorted(TERMINAL_PHASES))
def test_it_accepts_nothing_in_a_terminal_phase(phase):
    assert allowed_events(phase) == frozenset()
    for event in Event:
        with pytest.raises(IllegalTransitionError) as caught:
            transition(phase, event, run_id="run-done")
        assert "terminal" in str(caught.value)
        assert caught.value.context == {
            "phase": phase.value, "event": event.value, "run_id": "run-done",
        }


@pytest.mark.parametrize(
    ("phase", "event"),
    [
        (Phase.RUNNING, Event.EXECUTED),  # no pending write to execute
        (Phase.RUNNING, Event.REVIEW_REPLAN),
        (Phase.PENDING, Event.PROPOSE_WRITE),  # one write at a time
        (Phase.PENDING, Event.VERIFIED),
        (Phase.PENDING, Event.BUDGET_EXHAUSTED),  # the write may have happened: reconcile first
        (Phase.AWAITING_APPROVAL, Event.EXECUTED),  # never execute without a usable approval
        (Phase.AWAITING_APPROVAL, Event.BUDGET_EXHAUSTED),
        (Phase.NEEDS_REVIEW, Event.EXECUTED),  # frozen: no pending execution
        (Phase.NEEDS_REVIEW, Event.PROPOSE_WRITE),  # frozen: no new proposals
        (Phase.NEEDS_REVIEW, Event.APPROVED),
        (Phase.NEEDS_REVIEW, Event.VERIFIED),
    ],
)
def test_it_refuses_moves_the_design_does_not_allow(phase, event):
    with pytest.raises(IllegalTransitionError) as caught:
        transition(phase, event)
    assert caught.value.context == {"phase": phase.value, "event": event.value}
    assert event not in allowed_events(phase)


def test_it_lets_an_operator_cancel_any_live_run():
    for phase in set(Phase) - TERMINAL_PHASES:
        assert transition(phase, Event.CANCEL) is Phase.CANCELLED


def test_it_knows_every_phase_and_uses_every_event():
    assert set(TRANSITIONS) == set(Phase)
    used = {event for moves in TRANSITIONS.values() for event in moves}
    assert used == set(Event)


def test_it_can_reach_every_phase_from_running():
    seen, frontier = {Phase.RUNNING}, [Phase.RUNNING]
    while frontier:
        for nxt in TRANSITIONS[frontier.pop()].values():
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    assert seen == set(Phase)


def test_it_accepts_plain_string_values_and_refuses_unknown_ones():
    assert transition("running", "propose_write") is Phase.PENDING
    with pytest.raises(IllegalTransitionError):
        transition("paused", Event.CANCEL)
    with pytest.raises(IllegalTransitionError):
        transition(Phase.RUNNING, "continue")
    with pytest.raises(IllegalTransitionError):
        allowed_events("paused")


def test_its_table_cannot_be_edited_at_runtime():
    with pytest.raises(TypeError):
        TRANSITIONS[Phase.FAILED] = {Event.REVIEW_REPLAN: Phase.RUNNING}  # type: ignore[index]
    with pytest.raises(TypeError):
        TRANSITIONS[Phase.COMPLETED][Event.CANCEL] = Phase.RUNNING  # type: ignore[index]


def test_its_error_is_a_ratchet_error_that_survives_pickling():
    with pytest.raises(IllegalTransitionError) as caught:
        transition(Phase.FAILED, Event.REVIEW_REPLAN, run_id="run-7")
    again = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(again, RatchetError)
    assert again.context == caught.value.context
    assert str(again) == str(caught.value)
    assert again.retryable is False
