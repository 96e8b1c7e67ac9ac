"""Each built-in adapter checks an approved write's deadline immediately before its commit point
and stamps the receipt on the deadline's (database) clock (DESIGN.md sections 4.7 and 5.5)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from runtime.adapters.deadline import CommitDeadline, adapter_takes_deadline
from runtime.errors import CommitDeadlinePassedError, InvalidActionError
from tests.adapters.support import Env, effects_for_key


def _deadline(seconds: float, *, offset: timedelta = timedelta(0)) -> CommitDeadline:
    return CommitDeadline(not_after=datetime.now(UTC) + offset + timedelta(seconds=seconds), clock_offset=offset)


def _slow(env: Env, deadline: CommitDeadline):
    """A blob fetch (before the commit point) that lasts until the deadline has passed."""

    def fetch(digest: str) -> bytes:
        while deadline.remaining_seconds() >= 0:
            time.sleep(0.01)  # a slow network share; the length is the deadline's, not a guess
        return env.blobs(digest)

    return fetch


def test_it_refuses_a_write_whose_deadline_passes_during_the_call(env: Env) -> None:
    action = env.write("limits.toml", b"max_orders = 3\n")
    deadline = _deadline(0.2)
    before = env.adapter.observe()

    with pytest.raises(CommitDeadlinePassedError):
        env.adapter.execute(action, idempotency_key="k-late", intent_digest=action.intent_digest(),
                            fencing_token=1, blobs=_slow(env, deadline), not_after=deadline)

    assert not (env.path / "limits.toml").exists()
    assert effects_for_key(env, "k-late") == 0
    assert env.reopen().lookup_receipt("k-late") is None
    assert env.reopen().observe().version == before.version
    # The key is free again: a fresh approval's write lands once.
    receipt = env.execute(action, "k-late", not_after=_deadline(600))
    assert receipt.idempotency_key == "k-late" and effects_for_key(env, "k-late") == 1


def test_it_stamps_the_receipt_on_the_deadlines_clock(env: Env) -> None:
    offset = timedelta(minutes=10)  # this machine runs ten minutes behind the database
    action = env.write("notes.txt", b"hello\n")
    before = datetime.now(UTC) + offset
    receipt = env.execute(action, "k-stamp", not_after=_deadline(600, offset=offset))
    after = datetime.now(UTC) + offset

    assert receipt.committed_at is not None
    assert before - timedelta(seconds=1) <= receipt.committed_at <= after + timedelta(seconds=1)
    assert env.reopen().lookup_receipt("k-stamp") == receipt


def test_it_refuses_a_deadline_that_is_not_one(env: Env) -> None:
    action = env.write("notes.txt", b"hello\n")
    with pytest.raises(InvalidActionError):
        env.execute(action, "k-bad", not_after="2099-01-01T00:00:00Z")
    assert effects_for_key(env, "k-bad") == 0


def test_the_built_in_adapters_declare_that_they_take_a_deadline(env: Env) -> None:
    assert adapter_takes_deadline(env.adapter)

    class OldPlugin:
        def execute(self, action, *, idempotency_key, intent_digest, fencing_token, blobs, approval_digest=None):
            raise AssertionError("not called")

    class NewPlugin:
        def execute(self, action, *, idempotency_key, intent_digest, fencing_token, blobs, approval_digest=None,
                    not_after=None):
            raise AssertionError("not called")

    assert not adapter_takes_deadline(OldPlugin())
    assert adapter_takes_deadline(NewPlugin())
