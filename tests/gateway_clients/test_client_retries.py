"""The SDK's one retry rule, used by both framework integrations: a ``retryable`` refusal is
repeated (the same call id never repeats an effect, DESIGN.md section 5.13) until it succeeds or
the time is up; any other, and a wait for a human that ran out, is raised at once."""

from __future__ import annotations

import time

import anyio
import pytest
from ratchet_client.errors import ApprovalWaitTimeout, PolicyRefused, RatchetError, RunBusy, TransportError
from ratchet_client.retries import retrying, retrying_async


class Flaky:
    """An attempt that raises each of ``errors`` once, then answers ``"done"``."""

    def __init__(self, *errors: RatchetError) -> None:
        self.errors, self.attempts = list(errors), 0

    def __call__(self) -> str:
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"

    async def run(self) -> str:
        return self()


def test_retryable_refusals_are_repeated_until_an_answer() -> None:
    attempt = Flaky(TransportError("no answer", retryable=True), RunBusy("held", retryable=True))
    assert retrying(attempt, seconds=30, pause=0.01) == "done" and attempt.attempts == 3


def test_a_refusal_that_is_not_retryable_and_a_timed_out_wait_raise_at_once() -> None:
    for error in (PolicyRefused("outside the policy"), ApprovalWaitTimeout("nobody decided", retryable=True)):
        attempt = Flaky(error)
        with pytest.raises(type(error)):
            retrying(attempt, seconds=30, pause=0.01)
        assert attempt.attempts == 1


def test_the_last_retryable_refusal_is_raised_once_the_time_is_up() -> None:
    attempt = Flaky(*(RunBusy("held", retryable=True) for _ in range(1000)))
    started = time.monotonic()
    with pytest.raises(RunBusy):
        retrying(attempt, seconds=0.3, pause=0.05)
    assert 2 <= attempt.attempts < 1000 and time.monotonic() - started < 30


def test_the_async_helper_follows_the_same_rule_and_the_servers_retry_after() -> None:
    attempt = Flaky(RatchetError("rate limited", retryable=True, context={"retry_after": 0.05}),
                    PolicyRefused("outside the policy"))
    with pytest.raises(PolicyRefused):
        anyio.run(lambda: retrying_async(attempt.run, seconds=30, pause=5))
    assert attempt.attempts == 2, "retry_after (0.05 s), not the 5 s pause, set the wait"
