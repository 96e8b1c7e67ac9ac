"""Story: a resume whose restore fails closed gives its lease back (DESIGN.md sections 4.4, 4.5).

An operator runs ``resume`` on a run whose committed checkpoint was damaged. Restore refuses
with a typed error and the lease it took is released at once: a second ``resume`` (the
operator's retry, or another worker) meets the same typed error instead of ``LeaseHeldError``
for the rest of the lease's time to live. (That ``recovery.failed`` stays the newest event of a
run that was recovering, so the sweeper leaves it alone, is checked by
``tests/runtime/test_main_database_backup.py``.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.database.routers import hwm_alias
from runtime.engine import run_advance, run_start
from runtime.errors import BadSignatureError, RatchetError
from runtime.models import Checkpoint, HighWaterMark, Run
from tests.engine.support import trace_events
from tests.factories import write_scripted_task

pytestmark = pytest.mark.django_db

STEPS = [{"target": "notes.txt", "content": "a note\n"}]


def _damage_the_committed_checkpoint(run_id: str) -> None:
    mark = HighWaterMark.objects.using(hwm_alias()).get(run_id=run_id)
    row = Checkpoint.objects.get(run_id=run_id, generation=mark.generation, digest=mark.checkpoint_digest)
    raw = bytearray(bytes(row.envelope))
    raw[len(raw) // 2] ^= 0x01
    Checkpoint.objects.filter(pk=row.pk).update(envelope=bytes(raw))


def test_a_resume_whose_restore_fails_gives_the_lease_back(tmp_path: Path) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS), worker="worker-a")
    _damage_the_committed_checkpoint(run_id)

    errors = []
    for worker in ("worker-b", "worker-c"):
        with pytest.raises(RatchetError) as caught:
            run_advance(run_id=run_id, worker=worker, ttl_seconds=600)
        errors.append(type(caught.value))

    assert errors == [BadSignatureError, BadSignatureError]
    run = Run.objects.get(run_id=run_id)
    assert (run.owner_worker, run.lease_expires_at) == ("", None)
    released = [event["worker"] for event in trace_events(run_id, "lease.released")]
    assert released[-2:] == ["worker-b", "worker-c"]
