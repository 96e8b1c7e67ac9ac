"""Story: a run whose restore fails closed while nobody crashed (N6, DESIGN.md section 5.7).

Before, such a restore (a MAC that does not verify, a missing checkpoint row, a mark mismatch)
traced nothing when the lease was free, so the sweeper re-queued the run every period and no
person was told. Now the first refusal is traced as ``restore.refused`` (not a failed recovery:
nobody crashed, so the recovery metrics are unchanged) as the run's newest event, and the sweeper
leaves the run alone; only a person's resume tries again, and meets the same typed error.
"""

from __future__ import annotations

import pytest
from django.db.models.functions import Now

from runtime.engine import run_advance, run_start
from runtime.errors import BadSignatureError, CheckpointError, RatchetError
from runtime.models import Checkpoint, ReviewCase, Run, TraceEvent
from runtime.workers.sweeper import runs_needing_recovery
from runtime.workers.tasks import advance_run_once

pytestmark = pytest.mark.django_db(transaction=True)


def _events(run_id: str, event_type: str) -> int:
    return TraceEvent.objects.filter(run_id=run_id, event_type=event_type).count()


def test_a_restore_that_fails_closed_is_traced_and_no_longer_swept(replay_task) -> None:
    run_id = run_start(spec_path=replay_task)
    run_advance(run_id=run_id, max_steps=1)  # a clean stop: the lease is released
    committed = Run.objects.get(run_id=run_id)
    Checkpoint.objects.filter(run_id=run_id, generation=committed.generation).delete()
    assert [c.run_id for c in runs_needing_recovery()] == [run_id]

    with pytest.raises(CheckpointError):
        run_advance(run_id=run_id, worker="worker-b")
    with pytest.raises(CheckpointError):
        run_advance(run_id=run_id, worker="worker-c")

    assert _events(run_id, "restore.refused") == 2  # one per attempt, each the newest event
    assert _events(run_id, "recovery.failed") == 0
    assert runs_needing_recovery() == []
    newest = TraceEvent.objects.filter(run_id=run_id).order_by("-seq").first()
    assert newest.event_type == "restore.refused" and newest.payload["error"]


def test_n6_a_refused_restore_opens_one_case_and_freezes_the_row_with_a_typed_reason(workspace_task) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)  # a clean stop: the lease is released
    committed = Run.objects.get(run_id=run_id)
    raw = bytearray(bytes(Checkpoint.objects.get(run_id=run_id, generation=committed.generation).envelope))
    raw[len(raw) // 2] ^= 0x01  # the MAC no longer verifies
    Checkpoint.objects.filter(run_id=run_id, generation=committed.generation).update(envelope=bytes(raw))

    for worker in ("worker-b", "worker-c", "worker-d"):
        with pytest.raises(BadSignatureError):
            run_advance(run_id=run_id, worker=worker)

    cases = ReviewCase.objects.filter(run_id=run_id)
    assert [(c.reason, c.status) for c in cases] == [("restore_refused", "open")]  # once, not per attempt
    assert cases[0].observed["error"] == "BadSignatureError" and cases[0].detail.startswith("BadSignatureError")
    row = Run.objects.get(run_id=run_id)
    assert (row.phase, row.stop_reason, row.generation) == ("needs_review", "restore_refused", committed.generation)
    newest = TraceEvent.objects.filter(run_id=run_id).order_by("-seq").first()
    assert newest.event_type == "restore.refused" and newest.payload["case_id"] == cases[0].case_id
    assert runs_needing_recovery() == []
    assert advance_run_once(run_id=run_id, generation=None, worker="w") == "needs-human"
    assert ReviewCase.objects.filter(run_id=run_id).count() == 1


def test_n6_a_recovery_whose_restore_is_refused_traces_recovery_failed_and_opens_the_case(workspace_task) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)
    committed = Run.objects.get(run_id=run_id)
    # A worker that died holding the lease: the next restore is a recovery.
    Run.objects.filter(run_id=run_id).update(owner_worker="dead-worker", lease_expires_at=Now())
    Checkpoint.objects.filter(run_id=run_id, generation=committed.generation).delete()

    with pytest.raises(CheckpointError):
        run_advance(run_id=run_id, worker="worker-b")

    failed = TraceEvent.objects.filter(run_id=run_id, event_type="recovery.failed")
    assert failed.count() == 1 and failed.first().payload["case_id"]
    assert ReviewCase.objects.filter(run_id=run_id, reason="restore_refused").count() == 1
    assert Run.objects.get(run_id=run_id).phase == "needs_review"
    assert runs_needing_recovery() == []


def test_n6_a_fixed_store_resumes_the_row_only_freeze(workspace_task) -> None:
    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)
    committed = Run.objects.get(run_id=run_id)
    good = bytes(Checkpoint.objects.get(run_id=run_id, generation=committed.generation).envelope)
    Checkpoint.objects.filter(run_id=run_id, generation=committed.generation).update(envelope=good[:-7])
    with pytest.raises(RatchetError):
        run_advance(run_id=run_id, worker="worker-b")
    assert Run.objects.get(run_id=run_id).stop_reason == "restore_refused"

    Checkpoint.objects.filter(run_id=run_id, generation=committed.generation).update(envelope=good)
    assert run_advance(run_id=run_id, worker="worker-b").phase == "completed"


@pytest.mark.postgres
def test_a_mark_store_that_does_not_answer_is_an_outage_not_a_case(workspace_task) -> None:
    """The mark store's database refuses connections (a real outage: ``ALLOW_CONNECTIONS false``
    and its backends ended): the restore fails closed with ``MarkStoreUnavailableError``, but the
    run stays live with no case and no freeze, and resumes once the store answers (DESIGN.md
    section 8.8)."""
    from django.db import connections

    from runtime.errors import MarkStoreUnavailableError

    run_id = run_start(spec_path=workspace_task)
    run_advance(run_id=run_id, max_steps=1)  # a clean stop: the lease is released
    hwm = connections["hwm"].settings_dict["NAME"]
    admin = connections["default"]
    quoted = '"' + hwm.replace('"', '""') + '"'
    with admin.cursor() as cursor:
        cursor.execute(f"ALTER DATABASE {quoted} WITH ALLOW_CONNECTIONS false")
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                       "AND pid <> pg_backend_pid()", [hwm])
    connections["hwm"].close()
    try:
        with pytest.raises(MarkStoreUnavailableError):
            run_advance(run_id=run_id, worker="worker-during-the-outage")
        assert not ReviewCase.objects.filter(run_id=run_id).exists()
        assert Run.objects.get(run_id=run_id).phase in ("pending", "running")
        # Nothing that would stop the sweeper: it keeps offering the run until the store answers.
        assert _events(run_id, "restore.refused") == _events(run_id, "recovery.failed") == 0
        assert run_id in [c.run_id for c in runs_needing_recovery()]
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"ALTER DATABASE {quoted} WITH ALLOW_CONNECTIONS true")
        connections["hwm"].close()
    report = run_advance(run_id=run_id, worker="worker-after-the-outage")
    assert report.phase == "completed"
    assert not ReviewCase.objects.filter(run_id=run_id).exists()
