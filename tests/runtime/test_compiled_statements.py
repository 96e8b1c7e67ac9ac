"""Story: the commit and restore paths' INSERTs, DELETE and SELECTs are compiled once and refilled,
and do exactly what the query API would (DESIGN.md section 4.3).

``runtime.database.statements`` caches the SQL the ORM writes for the statements every checkpoint
advance and restore runs. These check, on real rows of a real run, that a refilled INSERT stores
what ``bulk_create`` stores (database defaults included, a duplicate ignored only when asked),
that a refilled SELECT returns the values the ORM returns (converted: datetimes, JSON), and that a
refilled DELETE removes only the rows its filter names.
"""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.utils import timezone

from runtime.database.statements import compiled_delete, compiled_insert, compiled_rows
from runtime.models import Checkpoint, LedgerEntry, Run, TraceEvent

pytestmark = pytest.mark.django_db

_COLUMNS = tuple(f.attname for f in Run._meta.concrete_fields)


def _ledger_row(run_id: str, seq: int) -> LedgerEntry:
    return LedgerEntry(run_id=run_id, seq=seq, kind="executed_write", key=f"key-{seq}", body="{}",
                       prev_hash=f"p{seq}", entry_hash=f"h{seq}", generation=1)


def test_it_inserts_what_bulk_create_would_and_ignores_a_duplicate_only_when_asked(start_run):
    state, _first = start_run()
    run_id = state.identity.run_id
    before = LedgerEntry.objects.filter(run_id=run_id).count()
    for seq in (1001, 1002):  # the second call refills the template the first one compiled
        compiled_insert(alias=DEFAULT_DB_ALIAS, objs=[_ledger_row(run_id, seq)])
    compiled_insert(alias=DEFAULT_DB_ALIAS, objs=[_ledger_row(run_id, 1001)], ignore_conflicts=True)

    rows = LedgerEntry.objects.filter(run_id=run_id, seq__gte=1001).order_by("seq")
    assert [(r.seq, r.key, r.entry_hash) for r in rows] == [(1001, "key-1001", "h1001"),
                                                           (1002, "key-1002", "h1002")]
    assert LedgerEntry.objects.filter(run_id=run_id).count() == before + 2
    with pytest.raises(IntegrityError), transaction.atomic():
        compiled_insert(alias=DEFAULT_DB_ALIAS, objs=[_ledger_row(run_id, 1002)])


def test_it_lets_the_database_fill_its_defaults_and_ignores_the_same_checkpoint_twice(start_run):
    state, _first = start_run()
    run_id = state.identity.run_id

    def row(generation: int) -> Checkpoint:
        return Checkpoint(run_id=run_id, generation=generation, envelope=b"bytes %d" % generation,
                          digest=f"sha256:{generation:064x}", key_id="k", schema_version=1,
                          lease_version=1)

    for generation in (901, 902, 902):  # compiled, refilled, and the same bytes again
        compiled_insert(alias=DEFAULT_DB_ALIAS, objs=[row(generation)], ignore_conflicts=True)

    stored = Checkpoint.objects.filter(run_id=run_id, generation__gte=901).order_by("generation")
    assert [(c.generation, bytes(c.envelope)) for c in stored] == [(901, b"bytes 901"),
                                                                  (902, b"bytes 902")]
    assert all(c.created_at is not None for c in stored)  # the column's database default ran


def test_it_inserts_several_rows_with_json_payloads_in_one_statement(start_run):
    state, _first = start_run()
    run_id = state.identity.run_id
    now = timezone.now()
    seqs = (5001, 5002)
    for offset in (0, 10):  # twice: compiled, then refilled
        compiled_insert(alias=DEFAULT_DB_ALIAS, objs=[
            TraceEvent(run_id=run_id, seq=seq + offset, event_type="test.event",
                       payload={"n": seq + offset, "text": "ünïcode"}, environment_version="v",
                       created_at=now, prev_hash="p", hash=f"h{seq + offset}")
            for seq in seqs])

    stored = TraceEvent.objects.filter(run_id=run_id, seq__gte=5001).order_by("seq")
    assert [(e.seq, e.payload) for e in stored] == [
        (seq, {"n": seq, "text": "ünïcode"}) for seq in (5001, 5002, 5011, 5012)]
    assert {e.created_at for e in stored} == {now}


def test_it_reads_the_values_the_orm_reads_converted_the_same_way(start_run):
    ids = [start_run()[0].identity.run_id for _ in range(2)]
    for run_id in ids:  # the second read refills the first one's template
        rows = compiled_rows(alias=DEFAULT_DB_ALIAS, shape=("test_run_row",),
                             slots={"run_id": run_id},
                             build=lambda s: Run.objects.filter(run_id=s["run_id"])
                             .values_list(*_COLUMNS))
        assert rows == list(Run.objects.filter(run_id=run_id).values_list(*_COLUMNS))
        run = Run.from_db(DEFAULT_DB_ALIAS, _COLUMNS, rows[0])
        assert run.lease_expires_at.tzinfo is not None and isinstance(run.spec, dict)
    assert compiled_rows(alias=DEFAULT_DB_ALIAS, shape=("test_run_row",),
                         slots={"run_id": "no-such-run"},
                         build=lambda s: Run.objects.filter(run_id=s["run_id"])
                         .values_list(*_COLUMNS)) == []


def test_it_deletes_only_the_rows_its_filter_names(start_run):
    runs = [start_run()[0].identity.run_id for _ in range(2)]
    for run_id in runs:
        compiled_insert(alias=DEFAULT_DB_ALIAS,
                        objs=[_ledger_row(run_id, seq) for seq in (7001, 7002, 7003)])

    def build(s):
        return LedgerEntry.objects.filter(run_id=s["run_id"], seq__gt=s["length"])

    deleted = compiled_delete(alias=DEFAULT_DB_ALIAS, shape=("test_orphans",), build=build,
                              slots={"run_id": runs[0], "length": 7001})
    assert deleted == 2
    assert compiled_delete(alias=DEFAULT_DB_ALIAS, shape=("test_orphans",), build=build,
                           slots={"run_id": runs[1], "length": 7002}) == 1
    assert sorted(LedgerEntry.objects.filter(seq__gte=7001).values_list("run_id", "seq")) == sorted(
        [(runs[0], 7001), (runs[1], 7001), (runs[1], 7002)])
