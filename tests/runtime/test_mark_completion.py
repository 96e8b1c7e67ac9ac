"""Story: with the mark in its own database, a commit whose mark did not move is completed by
the next reader -- to exactly the checkpoint the run row names, and only that one (DESIGN.md
section 4.3, "The mark in its own database").

The crash itself is killed for real in ``tests/runtime/test_crash_safety.py`` (crash points
``checkpoint.before_hwm_cas`` and ``after_hwm_cas``); here the mark's compare-and-set is made to
fail in-process, and the stored rows are then edited the way a bad disk or an attacker with
database access would, to see each case fail closed without moving the mark.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from runtime.checkpoints import transaction as commit_transaction
from runtime.checkpoints.high_water_marks import hwm_advance
from runtime.checkpoints.mark_completion import hwm_committed
from runtime.checkpoints.protocol import checkpoint_commit, checkpoint_hwm, checkpoint_restore
from runtime.core.canonical import digest_bytes
from runtime.core.checkpoint import Phase, StopReason
from runtime.database.routers import hwm_alias
from runtime.errors import (
    BadSignatureError,
    CheckpointCorruptError,
    CheckpointNotFoundError,
    HighWaterMarkBehindError,
    HighWaterMarkMissingError,
    MarkPendingError,
)
from runtime.models import Checkpoint, HighWaterMark, Run
from runtime.ownership.leases import lease_acquire
from tests.factories import scenario_fingerprint
from tests.runtime.conftest import advance

pytestmark = pytest.mark.django_db(databases="__all__")

FP = scenario_fingerprint()


def _mark(run_id: str) -> tuple[int, str]:
    row = HighWaterMark.objects.using(hwm_alias()).get(run_id=run_id)
    return row.generation, row.checkpoint_digest


def _store_down(**_kwargs):
    raise HighWaterMarkMissingError("the high-water mark store is unavailable (test)")


def _commit_without_mark(monkeypatch, start_run) -> tuple[str, str]:
    """Commit generation 2 while the mark store refuses: the main transaction commits, the mark
    stays at 1. Returns the run id and the digest of generation 2."""
    state, first = start_run()

    with monkeypatch.context() as patched, pytest.raises(MarkPendingError):
        patched.setattr(commit_transaction, "hwm_advance", _store_down)
        checkpoint_commit(lease=first.lease, state=advance(state, planner_state={"marker": "g2"}),
                          expected_generation=1)
    run_id = state.identity.run_id
    run = Run.objects.get(run_id=run_id)
    assert (run.generation, _mark(run_id)[0]) == (2, 1)
    return run_id, run.checkpoint_digest


def test_a_commit_whose_mark_did_not_move_is_completed_by_the_next_restore(monkeypatch, start_run):
    run_id, digest = _commit_without_mark(monkeypatch, start_run)

    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=FP)

    assert (restored.generation, restored.digest, restored.state.planner_state) == (2, digest, {"marker": "g2"})
    assert _mark(run_id) == (2, digest)
    assert checkpoint_hwm(run_id=run_id).generation == 2  # once: the next reader finds it done


def test_the_committer_whose_mark_a_reader_completed_first_has_committed(monkeypatch, start_run):
    state, first = start_run()

    def reader_first(**kwargs):
        # Between the main commit and the mark's CAS, another process restores the run.
        hwm_committed(run=Run.objects.get(run_id=kwargs["run"].run_id))
        return hwm_advance(**kwargs)

    monkeypatch.setattr(commit_transaction, "hwm_advance", reader_first)
    result = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)

    assert result.generation == 2
    assert _mark(state.identity.run_id) == (2, result.digest)


def test_a_run_row_two_generations_ahead_of_the_mark_fails_closed(start_run):
    state, first = start_run()
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)
    checkpoint_commit(lease=second.lease, state=advance(advance(state)), expected_generation=2)
    run_id = state.identity.run_id
    # The mark store restored from a backup taken at generation 1.
    HighWaterMark.objects.using(hwm_alias()).filter(run_id=run_id).update(
        generation=1, checkpoint_digest=first.digest)

    with pytest.raises(HighWaterMarkBehindError):
        checkpoint_restore(run_id=run_id, scenario_fingerprint=FP)
    assert _mark(run_id) == (1, first.digest)


def _named_row_gone(run_id: str, digest: str) -> None:
    Run.objects.filter(run_id=run_id).update(checkpoint_digest="sha256:" + "0" * 64)


def _named_bytes_edited(run_id: str, digest: str) -> None:
    row = Checkpoint.objects.get(run_id=run_id, digest=digest)
    Checkpoint.objects.filter(pk=row.pk).update(envelope=bytes(row.envelope).replace(b'"g2"', b'"g3"'))


def _named_mac_forged(run_id: str, digest: str) -> None:
    # Bytes, digest column and the run row's digest all agree: only the MAC can tell.
    row = Checkpoint.objects.get(run_id=run_id, digest=digest)
    forged = bytes(row.envelope).replace(b'"g2"', b'"g3"')
    Checkpoint.objects.filter(pk=row.pk).update(envelope=forged, digest=digest_bytes(forged))
    Run.objects.filter(run_id=run_id).update(checkpoint_digest=digest_bytes(forged))


@pytest.mark.parametrize(("tamper", "error"), [
    (_named_row_gone, CheckpointNotFoundError),
    (_named_bytes_edited, CheckpointCorruptError),
    (_named_mac_forged, BadSignatureError),
], ids=["missing", "bytes-edited", "mac-forged"])
def test_a_named_checkpoint_that_does_not_verify_fails_closed_and_moves_nothing(
    monkeypatch, start_run, tamper, error
):
    run_id, digest = _commit_without_mark(monkeypatch, start_run)
    tamper(run_id, digest)

    with pytest.raises(error):
        checkpoint_restore(run_id=run_id, scenario_fingerprint=FP)
    assert _mark(run_id)[0] == 1


def test_a_run_row_an_earlier_release_left_behind_its_mark_catches_up_and_commits_again(start_run):
    state, first = start_run()
    second = checkpoint_commit(lease=first.lease, state=advance(state), expected_generation=1)
    run_id = state.identity.run_id
    # An earlier release moved the mark before the run row; a commit that stopped in between left
    # the row's mirror and state version one behind (its transaction rolled back).
    Run.objects.filter(run_id=run_id).update(generation=1, state_version=second.lease.state_version - 1)

    restored = checkpoint_restore(run_id=run_id, scenario_fingerprint=FP)

    assert restored.generation == 2
    assert Run.objects.get(run_id=run_id).generation == 2
    lease = replace(second.lease, state_version=restored.state_version)
    third = checkpoint_commit(lease=lease, state=advance(advance(state)), expected_generation=2)
    assert (third.generation, _mark(run_id)) == (3, (3, third.digest))


def test_a_commit_whose_mark_failed_says_it_committed_and_hands_back_the_committed_lease(monkeypatch, start_run):
    state, first = start_run()

    with monkeypatch.context() as patched, pytest.raises(MarkPendingError) as caught:
        patched.setattr(commit_transaction, "hwm_advance", _store_down)
        checkpoint_commit(lease=first.lease, state=advance(state, phase=Phase.CANCELLED,
                                                           stop_reason=StopReason.CANCELLED),
                          expected_generation=1, release=True)

    committed = caught.value.committed
    assert "is committed on the main database" in str(caught.value)
    assert (committed.generation, committed.lease.state_version) == (2, first.lease.state_version + 1)
    run = Run.objects.get(run_id=state.identity.run_id)
    assert (run.phase, run.generation, run.owner_worker) == ("cancelled", 2, "")  # released with it
    assert checkpoint_hwm(run_id=state.identity.run_id).generation == 2  # the next reader completes it


def test_a_reader_whose_mark_was_moved_past_its_commit_takes_the_newer_mark(monkeypatch, start_run):
    run_id, digest = _commit_without_mark(monkeypatch, start_run)
    stale_row = Run.objects.get(run_id=run_id)  # names generation 2, the mark says 1
    later = checkpoint_restore(run_id=run_id, scenario_fingerprint=FP)  # completes the mark
    lease = lease_acquire(run_id=run_id, worker="worker-a", ttl_seconds=30)  # the holder, again
    third = checkpoint_commit(lease=replace(lease, state_version=later.state_version),
                              state=advance(later.state), expected_generation=2)

    # The first reader read the run row before all that; its compare-and-set 1 -> 2 now fails.
    shown = hwm_committed(run=stale_row)

    assert (shown.generation, shown.digest) == (3, third.digest)


def test_a_reader_that_finds_the_mark_at_its_generation_with_another_digest_fails_closed(monkeypatch, start_run):
    """Never by this protocol: the mark holds the run row's generation but another checkpoint's
    digest. The reader's compare-and-set fails, the re-read shows no later commit, and it refuses
    instead of taking either checkpoint as committed; the mark is left as found."""
    from runtime.errors import StaleGenerationError

    run_id, digest = _commit_without_mark(monkeypatch, start_run)
    row = Run.objects.get(run_id=run_id)
    forged = "sha256:" + "f" * 64
    HighWaterMark.objects.using(hwm_alias()).filter(run_id=run_id).update(generation=2, checkpoint_digest=forged)
    # The reader read the mark (1) before that write: replay the race with the mark read it had.
    from runtime.checkpoints import mark_completion
    from runtime.checkpoints.high_water_marks import HighWaterMarkInfo

    first = Checkpoint.objects.get(run_id=run_id, generation=1).digest  # a real earlier commit
    reads = iter([HighWaterMarkInfo(generation=1, digest=first), HighWaterMarkInfo(generation=2, digest=forged)])
    monkeypatch.setattr(mark_completion, "hwm_read", lambda **kw: next(reads))

    with pytest.raises(StaleGenerationError):
        hwm_committed(run=row)
    assert _mark(run_id) == (2, forged)


def test_a_page_shows_the_stored_mark_when_completing_it_fails_closed(start_run):
    from runtime.checkpoints.mark_completion import hwm_for_display

    state, _first = start_run()
    run_id = state.identity.run_id
    Run.objects.filter(run_id=run_id).update(generation=5, checkpoint_digest="sha256:" + "0" * 64)
    row = Run.objects.get(run_id=run_id)

    shown = hwm_for_display(run=row)

    assert shown is not None and shown.generation == 1  # as stored; a restore refuses
    with pytest.raises(HighWaterMarkBehindError):
        hwm_committed(run=row)


def test_a_page_shows_no_mark_when_its_row_is_missing(start_run):
    from runtime.checkpoints.mark_completion import hwm_for_display

    state, _first = start_run()
    run_id = state.identity.run_id
    HighWaterMark.objects.using(hwm_alias()).filter(run_id=run_id).delete()

    assert hwm_for_display(run=Run.objects.get(run_id=run_id)) is None
