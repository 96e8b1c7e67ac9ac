"""The trace hash chain makes edits, deletions and reordering evident (DESIGN.md sections 1 and 8).

An admin browsing trace evidence must be able to tell whether anyone changed it behind the
runtime's back. Tampering here goes straight at the rows, as someone with database access would.
"""

from __future__ import annotations

import pytest

from runtime.checkpoints.protocol import checkpoint_commit
from runtime.errors import CanonicalizationError, RunNotFoundError, TraceChainError
from runtime.evidence.trace import event_hash, genesis_hash, trace_append, trace_verify
from runtime.models import AppendOnlyError, Run, TraceEvent
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db


@pytest.fixture
def traced_run(start_run) -> str:
    """A run with a few events of its own on top of the lease and commit events."""
    state, first = start_run()
    run_id = state.identity.run_id
    trace_append(
        run_id=run_id, event_type="observation", payload={"url": "https://example.test/", "n": 1.5}
    )
    checkpoint_commit(
        lease=first.lease,
        state=advance(state),
        expected_generation=1,
        events=[("action.proposed", {"kind": "write_file", "path": "a.txt"})],
    )
    trace_append(
        run_id=run_id, event_type="verifier.passed", payload={"ok": True}, environment_version="v0"
    )
    return run_id


def _event(run_id: str, seq: int) -> TraceEvent:
    return TraceEvent.objects.get(run_id=run_id, seq=seq)


def test_it_chains_every_event_to_the_one_before(traced_run):
    events = list(TraceEvent.objects.filter(run_id=traced_run).order_by("seq"))

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].prev_hash == genesis_hash(traced_run)
    assert all(
        later.prev_hash == earlier.hash for earlier, later in zip(events, events[1:], strict=False)
    )
    report = trace_verify(run_id=traced_run)
    assert (report.ok, report.count, report.first_bad_seq) == (True, len(events), None)
    run = Run.objects.get(run_id=traced_run)
    assert (run.trace_seq, run.trace_head) == (events[-1].seq, events[-1].hash)


def test_it_detects_an_edited_payload(traced_run):
    TraceEvent.objects.filter(run_id=traced_run, seq=3).update(
        payload={"url": "https://evil.test/", "n": 1.5}
    )

    report = trace_verify(run_id=traced_run)

    assert (report.ok, report.first_bad_seq) == (False, 3)
    assert "altered" in report.reason
    with pytest.raises(TraceChainError):
        report.raise_for_status(run_id=traced_run)


def test_it_detects_an_edited_event_whose_hash_was_recomputed_with_sha256(traced_run):
    """Rewriting the hash of the edited event still breaks the link from the next one."""
    event = _event(traced_run, 2)
    forged = event_hash(
        run_id=traced_run,
        seq=2,
        event_type=event.event_type,
        payload={"forged": True},
        environment_version=event.environment_version,
        created_at=event.created_at,
        prev_hash=event.prev_hash,
    )
    TraceEvent.objects.filter(pk=event.pk).update(payload={"forged": True}, hash=forged)

    report = trace_verify(run_id=traced_run)

    assert (report.ok, report.first_bad_seq) == (False, 3)


def test_it_detects_a_deleted_event(traced_run):
    TraceEvent.objects.filter(run_id=traced_run, seq=2).delete()

    report = trace_verify(run_id=traced_run)

    assert (report.ok, report.first_bad_seq) == (False, 2)
    assert "missing" in report.reason


def test_it_detects_a_deleted_last_event(traced_run):
    last = TraceEvent.objects.filter(run_id=traced_run).order_by("-seq").first()
    TraceEvent.objects.filter(pk=last.pk).delete()

    report = trace_verify(run_id=traced_run)

    assert (report.ok, report.first_bad_seq) == (False, last.seq)
    assert "deleted" in report.reason


def test_it_detects_reordered_events(traced_run):
    TraceEvent.objects.filter(run_id=traced_run, seq=2).update(seq=-2)
    TraceEvent.objects.filter(run_id=traced_run, seq=3).update(seq=2)
    TraceEvent.objects.filter(run_id=traced_run, seq=-2).update(seq=3)

    report = trace_verify(run_id=traced_run)

    assert (report.ok, report.first_bad_seq) == (False, 2)


def test_it_detects_an_event_spliced_in_from_another_run(traced_run, start_run):
    other, _ = start_run()
    foreign = _event(other.identity.run_id, 1)
    TraceEvent.objects.filter(run_id=traced_run, seq=1).update(
        payload=foreign.payload,
        hash=foreign.hash,
        prev_hash=foreign.prev_hash,
        created_at=foreign.created_at,
    )

    assert trace_verify(run_id=traced_run).first_bad_seq == 1


def test_it_refuses_updates_and_deletes_through_the_model(traced_run):
    event = _event(traced_run, 1)
    event.payload = {"changed": True}

    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()


def test_it_refuses_an_unserialisable_payload_and_an_unknown_run(traced_run):
    count = TraceEvent.objects.filter(run_id=traced_run).count()

    with pytest.raises(CanonicalizationError):
        trace_append(run_id=traced_run, event_type="bad", payload={"x": float("inf")})
    with pytest.raises(RunNotFoundError):
        trace_append(run_id="no-such-run", event_type="x", payload={})

    assert TraceEvent.objects.filter(run_id=traced_run).count() == count
    assert trace_verify(run_id=traced_run).ok


def test_it_keeps_a_deleted_last_event_evident_after_later_appends(traced_run):
    last = TraceEvent.objects.filter(run_id=traced_run).order_by("-seq").first()
    TraceEvent.objects.filter(pk=last.pk).delete()

    trace_append(run_id=traced_run, event_type="after.deletion", payload={})

    report = trace_verify(run_id=traced_run)
    assert (report.ok, report.first_bad_seq) == (False, last.seq)
