"""A worker is SIGKILLed inside the SQL adapter at every named crash point (DESIGN.md section 8).

A real child process arms one crash point and kills itself there; the database then either rolls
the open transaction back (killed before the commit: no row, no receipt, the pre-state) or holds
all of it (killed after: row, receipt and fence). A recovering worker asks the key, finishes
the step with the same key, and the target itself counts exactly one business row per key.
The slow matrix kills a child that applies many writes at random moments from outside.
"""

from __future__ import annotations

import os
import random
import signal
import time

import pytest

from runtime.adapters.sql import adapter as sql_module
from runtime.core.crashpoints import CRASH_POINTS
from tests.adapters.sql.support import Target, order, start_child

BEFORE_COMMIT = ["sql.before_write", "sql.before_commit"]
AFTER_COMMIT = ["sql.after_commit"]


def test_every_sql_crash_point_is_registered_and_covered() -> None:
    declared = {value for name, value in vars(sql_module).items() if name.startswith("CP_")}
    assert declared <= set(CRASH_POINTS)
    assert declared == set(BEFORE_COMMIT + AFTER_COMMIT)


@pytest.mark.parametrize("point", BEFORE_COMMIT + AFTER_COMMIT)
def test_it_keeps_one_row_per_key_after_a_sigkill(target: Target, point: str) -> None:
    action = order("o-1", "key-1")
    pre = target.adapter().observe()
    predicted = target.adapter().predict_post_state(action, blobs=lambda digest: b"")

    child = start_child(target, action, "key-1", token=1, crash_at=point)
    _, err = child.communicate(timeout=120)

    assert child.returncode == -signal.SIGKILL, err
    adapter = target.adapter()  # the recovering worker
    receipt = adapter.lookup_receipt("key-1")
    observed = adapter.observe()
    if point in AFTER_COMMIT:
        assert receipt is not None and receipt.intent_digest == action.intent_digest()
        assert observed.version == receipt.environment_version_after
        assert observed.state_fingerprint == predicted
    else:
        assert receipt is None
        assert (observed.version, observed.state_fingerprint) == (pre.version, pre.state_fingerprint)
        assert target.receipt_rows() == 0

    final = adapter.execute(action, idempotency_key="key-1", intent_digest=action.intent_digest(),
                            fencing_token=2, blobs=lambda digest: b"")

    if receipt is not None:
        assert final == receipt
    assert target.rows_for_key("key-1") == 1
    assert target.receipt_rows() == 1
    assert adapter.observe().state_fingerprint == predicted


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("rounds", [40])
def test_it_keeps_one_row_per_key_under_sigkills_at_random_moments(target: Target, rounds: int) -> None:
    rng = random.Random(11)
    for i in range(rounds):
        key = f"key-{i}"
        action = order(f"o-{i}", key)
        child = start_child(target, action, key, token=1)
        time.sleep(rng.uniform(0.05, 1.2))  # about a child's start-up time: lands before, in or after the write
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=120)
        adapter = target.adapter()
        adapter.execute(action, idempotency_key=key, intent_digest=action.intent_digest(), fencing_token=1,
                        blobs=lambda digest: b"")
        assert target.rows_for_key(key) == 1, f"round {i}"
    assert target.receipt_rows() == rounds
    assert target.adapter().observe().version == f"s{rounds}"
