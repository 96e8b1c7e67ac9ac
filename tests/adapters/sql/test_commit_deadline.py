"""The SQL adapter checks an approved write's deadline immediately before COMMIT; a late write
rolls back whole (DESIGN.md sections 5.5 and 5.11)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

import runtime.adapters.deadline as deadline_module
from runtime.adapters.deadline import CommitDeadline
from runtime.errors import CommitDeadlinePassedError
from tests.adapters.sql.support import Target, order


def _execute(adapter, action, key, **kwargs):
    return adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(),
                           fencing_token=1, blobs=lambda digest: b"", **kwargs)


def test_it_rolls_back_a_write_whose_deadline_passes_before_commit(target: Target, monkeypatch) -> None:
    start = datetime.now(UTC)
    deadline = CommitDeadline(not_after=start + timedelta(minutes=5), clock_offset=timedelta(0))
    # The statement runs at the start; by the check before COMMIT an hour has gone by (a lock
    # wait, a slow trigger): the clock is the test's to move, so nothing here races.
    readings = iter([start, start + timedelta(hours=1)])
    monkeypatch.setattr(deadline_module, "_local_now", lambda: next(readings))
    adapter = target.adapter()

    with pytest.raises(CommitDeadlinePassedError):
        _execute(adapter, order("o-1", "key-late"), "key-late", not_after=deadline)

    assert target.rows_for_key("key-late") == 0
    assert target.receipt_rows() == 0
    assert target.adapter().lookup_receipt("key-late") is None
    assert adapter.observe().version == "s0"


def test_it_stamps_the_receipt_on_the_deadlines_clock(target: Target) -> None:
    offset = timedelta(minutes=-10)  # this machine runs ten minutes ahead of the database
    deadline = CommitDeadline(not_after=datetime.now(UTC) + offset + timedelta(minutes=5), clock_offset=offset)
    before = datetime.now(UTC) + offset
    receipt = _execute(target.adapter(), order("o-1", "key-1"), "key-1", not_after=deadline)

    assert receipt.committed_at is not None
    assert before <= receipt.committed_at <= deadline.not_after
    assert target.adapter().lookup_receipt("key-1") == receipt
