"""Story: the credential expired while nobody drove the run; the resume freezes before anything executes.

DESIGN.md section 5.9 ("before recovery, check whether ... credentials are still valid"). A run
placed its first order (and committed the intent of its second with that receipt, DESIGN.md
section 4.13); then the operator's service revoked the bearer token. A worker resuming
the run (``manage.py resume``, a child process) probes the credential first: the run freezes in
``needs_review`` with a reason that names the credential, nothing is proposed or sent, and the
service still holds the one order.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from tests.adapters.http.support import OrdersService
from tests.engine.http.support import manage_resume, run_keys, write_orders_task
from tests.engine.support import restore, trace_types


@pytest.mark.django_db(transaction=True)
def test_it_freezes_on_an_expired_credential_before_anything_executes(
        tmp_path: Path, orders: OrdersService, secrets_in_env: None) -> None:
    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, count=3))
    # order 0 placed and recorded; one commit per write (DESIGN.md section 4.13) committed the
    # intent of order 1 with that receipt, before the credential expired
    assert run_advance(run_id=run_id, max_steps=2).cursor == 1
    folded = restore(run_id).state.pending
    assert folded is not None and folded.idempotency_key == run_keys(run_id, 2)[1]
    events_before = trace_types(run_id)
    orders.expire_credential()

    resumed = manage_resume(run_id, orders)

    assert "needs_review" in resumed.stdout, (resumed.returncode, resumed.stdout, resumed.stderr)
    state = restore(run_id).state
    assert (state.phase, state.stop_reason) == ("needs_review", "adapter_refused")
    assert "credential is not valid before resuming, nothing was executed" in (state.stop_detail or "")
    assert "HttpCredentialExpiredError" in (state.stop_detail or "")
    new_events = trace_types(run_id)[len(events_before):]
    assert not {"intent.proposed", "write.executed", "write.outcome_unknown"} & set(new_events)
    # the intent committed before the expiry is still only an intent: nothing was sent for it
    assert state.cursor == 1 and state.pending is not None
    assert state.pending.intent_digest == folded.intent_digest
    assert orders.orders_per_key() == {run_keys(run_id, 1)[0]: 1}
