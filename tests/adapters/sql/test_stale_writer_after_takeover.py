"""Two workers race for one pending write after a lease takeover (DESIGN.md section 4, fencing).

The old worker holds fencing token 1, the new one token 2. Real processes execute the same key at
the same moment: the target's fence row and its receipt table let exactly one business row
exist, and once the new worker's token is in the target the stale worker is refused by the fence
whatever it tries. The ordered story shows the refusal deterministically.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.errors import FencingTokenError
from tests.adapters.sql.support import Target, order, run_child, start_child

OLD, NEW = 1, 2


def test_it_refuses_the_stale_worker_after_the_new_one_wrote(target: Target) -> None:
    action = order("o-1", "key-1")
    target.adapter().execute(action, idempotency_key="key-1", intent_digest=action.intent_digest(),
                             fencing_token=NEW, blobs=lambda digest: b"")

    code, stale = run_child(target, action, "key-1", token=OLD)
    code_next, stale_next = run_child(target, order("o-2", "key-2"), "key-2", token=OLD)

    assert stale == {"error": "FencingTokenError"} and code == 3
    assert stale_next == {"error": "FencingTokenError"} and code_next == 3
    assert target.rows_for_key("key-1") == 1
    assert target.rows_for_key("key-2") == 0
    with pytest.raises(FencingTokenError):
        target.adapter().execute(action, idempotency_key="key-1", intent_digest=action.intent_digest(),
                                 fencing_token=OLD, blobs=lambda digest: b"")


@pytest.mark.parametrize("rounds", [pytest.param(1, id="1-round"),
                                    pytest.param(20, id="20-rounds", marks=pytest.mark.slow)])
def test_it_lets_one_of_two_racing_workers_write(target: Target, tmp_path: Path, rounds: int) -> None:
    for i in range(rounds):
        key = f"key-{i}"
        action = order(f"o-{i}", key)
        go = tmp_path / f"go-{i}"
        procs = {token: start_child(target, action, key, token=token, start_file=go) for token in (OLD, NEW)}
        go.touch()
        results = {}
        for token, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            results[token] = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"stderr": err}

        assert target.rows_for_key(key) == 1, results
        assert "receipt" in results[NEW], results  # the new lease holder always ends with the receipt
        stored = target.adapter().lookup_receipt(key)
        assert stored is not None and results[NEW]["receipt"] == stored.model_dump(mode="json")
        if stored.fencing_token == NEW:
            # The new worker committed first: the stale one was refused by the fence.
            assert results[OLD] == {"error": "FencingTokenError"}, results
        else:
            # The stale worker committed before the new token reached the target (its lease was
            # still the newest the target had seen); the new worker found its receipt by key.
            assert results[OLD]["receipt"] == results[NEW]["receipt"]
    assert target.receipt_rows() == rounds
