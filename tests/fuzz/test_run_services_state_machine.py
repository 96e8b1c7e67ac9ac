"""Random interleavings of the real run services keep the four invariants (DESIGN.md sections 4-6).

Story: workers advance a run, die holding its lease or right after a write,
leases expire, operators approve, someone reuses a key so the run freezes for review, reviewers
decide -- and submit the same decision again -- in any order hypothesis can think of. Whatever
happens, after every step:

* the generation (the high-water mark) never rolls back;
* a worker whose lease is stale (taken over, or expired by the database clock) can never commit;
* an idempotency key never executes twice: the adapter's own records hold at most one receipt
  per key (DESIGN.md section 5.1);
* a signed decision is never applied twice: at most one ``review.replanned``/``review.aborted``
  event per case, and a re-submitted decision changes nothing;

and the trace chain verifies. A crash is modelled as the worker's in-memory state being dropped
(its lease object, the process hints a fresh process would not have) while what it wrote stays.
Expiry is modelled by moving the run row's lease expiry into the past: the database clock is
the only one that counts (DESIGN.md section 4.7; a worker's fast clock changes nothing, see
``tests/runtime/test_leases.py``). The quick variant runs in CI; the ``slow`` one explores many
more interleavings.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models.functions import Now
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import runtime.checkpoints.ledger
import runtime.ownership.leases
import runtime.workers.dispatch
from runtime.adapters.factory import open_adapter
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_hwm, checkpoint_verify
from runtime.core.checkpoint import Action, Phase, Risk
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.decisions.reviews import case_decide, decision_sign_for
from runtime.engine import run_advance, run_start
from runtime.errors import (
    AdapterError,
    ApprovalRefusedError,
    LeaseError,
    RatchetError,
    StaleGenerationError,
)
from runtime.evidence.attachments import attachment_get, attachment_put
from runtime.evidence.trace import trace_head_forget, trace_verify
from runtime.models import ReviewCase, Run, TraceEvent
from runtime.ownership.leases import Lease, lease_acquire
from tests.factories import write_scripted_task
from tests.fuzz.profiles import _COMMON

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [
    {"target": "a.txt", "content": "A\n"},
    {"target": "limits.toml", "content": "max_orders = 3\n", "risk": "high"},
    {"target": "b.txt", "content": "B\n"},
]
WORKERS = st.sampled_from(["worker-1", "worker-2", "worker-3"])
DECISION_EVENTS = ("review.replanned", "review.aborted")
TTL = 3600.0
"""Lease time to live (seconds): long, so only the ``lease_expires`` rule ends a lease and an
example replays the same way however slowly the machine runs it."""


class RunServices(RuleBasedStateMachine):
    """One scripted workspace run per example, driven through the real services."""

    def __init__(self) -> None:
        super().__init__()
        self.run_id = ""
        self.workspace = Path()
        self.generation = 0
        self.leases: list[Lease] = []
        self.decisions: list = []
        self.adapter = None

    # -- helpers --------------------------------------------------------------------------------

    def _row(self) -> dict:
        return Run.objects.filter(run_id=self.run_id).values(
            "owner_worker", "lease_version", "lease_expires_at", "phase").get()

    def _phase(self) -> str:
        return self._row()["phase"] if self.run_id else ""

    def _state(self):
        return checkpoint_verify(run_id=self.run_id).state

    def _forget(self) -> None:
        """What a process that died takes with it: its per-process hints."""
        trace_head_forget(self.run_id)
        runtime.checkpoints.ledger._VERIFIED.pop(self.run_id, None)  # a fresh process starts without the hint

    def _adapter(self):
        if self.adapter is None:
            self.adapter = open_adapter("workspace", self.workspace)
        return self.adapter

    def _take_lease(self, worker: str) -> Lease | None:
        try:
            lease = lease_acquire(run_id=self.run_id, worker=worker, ttl_seconds=TTL)
        except LeaseError:
            return None
        self.leases.append(lease)
        return lease

    # -- setup ----------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        directory = Path(tempfile.mkdtemp(prefix="ratchet-machine-"))
        spec = write_scripted_task(directory, steps=STEPS, approval_risks=("high",))
        # A task of its own per example: the admission gate judges recoveries per tenant and
        # task, and the frozen runs of earlier examples must not close admission for this one.
        spec.write_text(spec.read_text().replace('id = "story"', f'id = "story-{directory.name}"', 1))
        self.run_id = run_start(spec_path=spec, worker="worker-start")
        self.workspace = directory / "ws"
        self.generation = checkpoint_hwm(run_id=self.run_id).generation

    # -- rules ----------------------------------------------------------------------------------

    @rule(worker=WORKERS, max_steps=st.sampled_from([1, 1, 2, None]))
    def advance(self, worker: str, max_steps: int | None) -> None:
        try:
            report = run_advance(run_id=self.run_id, worker=worker, max_steps=max_steps, ttl_seconds=TTL)
            event(f"advance ended {report.phase} ({report.stop_reason})")
        except (LeaseError, StaleGenerationError) as exc:
            event(f"advance refused: {type(exc).__name__}")  # another worker holds the run

    @rule(worker=WORKERS)
    def crash_holding_the_lease(self, worker: str) -> None:
        """A worker takes the lease and its process dies: the lease stays until it expires."""
        self._take_lease(worker)
        self._forget()

    @precondition(lambda self: self._phase() == Phase.PENDING.value)
    @rule(worker=WORKERS)
    def crash_right_after_the_write(self, worker: str) -> None:
        """A worker performs the pending low-risk write through the adapter and dies before it
        commits the receipt: recovery must adopt that receipt, never write again."""
        state = self._state()
        pending = state.pending
        if state.phase != Phase.PENDING or pending is None or pending.action.risk != Risk.LOW:
            return
        lease = self._take_lease(worker)
        if lease is None:
            return
        try:
            self._adapter().execute(pending.action, idempotency_key=pending.idempotency_key,
                                    intent_digest=pending.intent_digest, fencing_token=lease.lease_version,
                                    blobs=lambda d: attachment_get(digest=d))
            event("crashed right after a write")
        except AdapterError:
            pass  # e.g. the key already holds a receipt: the adapter refuses, nothing written
        self._forget()

    @rule()
    def lease_expires(self) -> None:
        Run.objects.filter(run_id=self.run_id).update(lease_expires_at=Now() - timedelta(seconds=1))

    @precondition(lambda self: bool(self.leases))
    @rule(data=st.data())
    def stale_holder_tries_to_commit(self, data) -> None:
        row = self._row()
        stale = [lease for lease in self.leases
                 if lease.lease_version != row["lease_version"] or lease.worker != row["owner_worker"]]
        if not stale:
            return
        lease = data.draw(st.sampled_from(stale), label="stale lease")
        before = checkpoint_hwm(run_id=self.run_id)
        state = self._state()
        with pytest.raises(RatchetError) as refused:
            checkpoint_commit(lease=lease, state=state, expected_generation=before.generation,
                              events=[("stale.commit", {"worker": lease.worker})])
        assert isinstance(refused.value, LeaseError | StaleGenerationError), repr(refused.value)
        assert checkpoint_hwm(run_id=self.run_id) == before
        assert not TraceEvent.objects.filter(run_id=self.run_id, event_type="stale.commit").exists()
        event(f"stale commit refused: {type(refused.value).__name__}")

    @precondition(lambda self: self._phase() == Phase.AWAITING_APPROVAL.value)
    @rule()
    def operator_approves(self) -> None:
        waiting = approvals_waiting(run_ids=[self.run_id])
        if not waiting:
            return
        try:
            approval_grant(run_id=self.run_id, approver="olivia",
                           environment_fingerprint=waiting[0].environment_fingerprint, ttl_seconds=600)
            event("approved")
        except (ApprovalRefusedError, LeaseError) as exc:
            event(f"approval refused: {type(exc).__name__}")

    @precondition(lambda self: self._phase() == Phase.PENDING.value)
    @rule()
    def someone_reuses_the_pending_key(self) -> None:
        """Another writer lands a different intent under the pending key: the run must freeze
        for review (a receipt conflict), which gives the reviewers something to decide."""
        state = self._state()
        pending = state.pending
        if state.phase != Phase.PENDING or pending is None or pending.action.risk != Risk.LOW:
            return
        if any(r.idempotency_key == pending.idempotency_key for r in self._adapter().receipts()):
            return
        rogue = Action(kind="write_file", target=pending.action.target,
                       params={"content": attachment_put(data=b"rogue write\n"), "executable": False})
        try:
            self._adapter().execute(rogue, idempotency_key=pending.idempotency_key,
                                    intent_digest=rogue.intent_digest(),
                                    fencing_token=self._row()["lease_version"],
                                    blobs=lambda d: attachment_get(digest=d))
        except AdapterError:
            pass

    @precondition(lambda self: self._phase() == Phase.NEEDS_REVIEW.value)
    @rule(kind=st.sampled_from(["replan", "abort"]))
    def reviewer_decides(self, kind: str) -> None:
        case = ReviewCase.objects.filter(run_id=self.run_id, status="open").first()
        if case is None:
            return
        try:
            signed = decision_sign_for(case_id=case.case_id, reviewer="rita", decision=kind)
            self.decisions.append(signed)
            outcome = case_decide(decision=signed)
            event(f"decision {kind}: {'applied' if outcome.applied else 'refused'}")
        except LeaseError:
            event("decision waited for the lease")

    @precondition(lambda self: bool(self.decisions))
    @rule(data=st.data())
    def the_same_decision_arrives_again(self, data) -> None:
        decision = data.draw(st.sampled_from(self.decisions), label="decision")
        before = checkpoint_hwm(run_id=self.run_id)
        try:
            outcome = case_decide(decision=decision)
        except LeaseError:
            return
        event(f"decision again: {'already applied' if outcome.already_applied else outcome.reason[:30]}")
        if outcome.applied:
            assert outcome.already_applied, "a decision was applied a second time"
            assert checkpoint_hwm(run_id=self.run_id) == before

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def generation_never_rolls_back(self) -> None:
        if not self.run_id:
            return
        now = checkpoint_hwm(run_id=self.run_id).generation
        assert now >= self.generation, f"generation went back from {self.generation} to {now}"
        self.generation = now

    @invariant()
    def no_key_executes_twice(self) -> None:
        if not self.run_id:
            return
        counts = Counter(r.idempotency_key for r in self._adapter().receipts())
        assert all(n == 1 for n in counts.values()), counts

    @invariant()
    def no_decision_is_applied_twice(self) -> None:
        if not self.run_id:
            return
        applied = Counter(e.payload["case_id"] for e in TraceEvent.objects.filter(
            run_id=self.run_id, event_type__in=DECISION_EVENTS))
        assert all(n == 1 for n in applied.values()), applied

    @invariant()
    def the_trace_chain_verifies(self) -> None:
        if self.run_id:
            report = trace_verify(run_id=self.run_id)
            assert report.ok, report.reason


class _InstantWait:
    """Stands in for ``time`` in ``runtime.ownership.leases``: a service that waits for a busy lease
    (``lease_acquire_waiting``) gives up at once instead of after seconds of real sleep. Lease
    expiry is judged by the database clock, which this does not touch."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def quiet_services(monkeypatch) -> None:
    """The machine drives every advance itself, so an approval or replan publishes no task, and
    waiting for a busy lease costs no wall time."""
    monkeypatch.setattr(runtime.workers.dispatch, "run_enqueue", lambda *, run_id: None)
    monkeypatch.setattr(runtime.ownership.leases, "time", _InstantWait())


def test_random_interleavings_keep_the_invariants(ratchet_keys) -> None:
    run_state_machine_as_test(RunServices, settings=settings(max_examples=6, stateful_step_count=15, **_COMMON))


@pytest.mark.slow
@pytest.mark.timeout(3600)  # about 150 runs of 40 steps each: minutes, not the default 300 s
def test_many_random_interleavings_keep_the_invariants(ratchet_keys) -> None:
    run_state_machine_as_test(RunServices, settings=settings(max_examples=150, stateful_step_count=40, **_COMMON))
