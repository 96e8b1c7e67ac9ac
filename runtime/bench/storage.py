"""Storage per replayed commit, and what archiving finished runs gives back (DESIGN.md sections
4.10 and 4.11).

``storage_measure`` replays the generated history once and reports the bytes it added: database
(the runtime's tables, compacted first so deleted space is not counted) and var directory
(everything under ``RATCHET_VAR_DIR`` except the embedded database files, i.e. attachments,
keys, archives), each per commit, the rows per commit of every table, and the var directory
against the size of the replayed clone. ``archive_measure`` makes finished runs and one live
run, archives the finished ones and reports the database bytes they held and gave back, the
seconds per archived run, that every archived bundle verifies with public keys only, and that
the live run was untouched and then completed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import connection

from runtime.archive.runs import archive_pass
from runtime.archive.selection import ArchiveSelection
from runtime.archive.verify import archived_bundle_findings
from runtime.bench.report import BenchReport
from runtime.bench.sizes import BenchSizes
from runtime.bench.write_counts import workspace_task
from runtime.core.checkpoint import Phase
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.errors import BenchmarkError
from runtime.keys import public_keys_document
from runtime.models import Run
from runtime.taskspec.writing import toml_dumps

_DB_SUFFIXES = (".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".sqlite3-journal")


def tree_bytes(path: Path, *, skip_databases: bool = False, skip: Path | None = None) -> int:
    """Bytes of the regular files under ``path`` (``skip_databases``: not the SQLite files;
    ``skip``: not what is under that folder)."""
    total = 0
    for item in path.rglob("*"):
        if item.is_file() and not item.is_symlink():
            if skip_databases and item.name.endswith(_DB_SUFFIXES):
                continue
            if skip is not None and item.is_relative_to(skip):
                continue
            total += item.stat().st_size
    return total


def _tables() -> list[str]:
    """The runtime app's tables in the default database (the mark's may be in its own)."""
    present = set(connection.introspection.table_names())
    return [m._meta.db_table for m in apps.get_app_config("runtime").get_models() if m._meta.db_table in present]


def database_bytes() -> int:
    """Bytes of the runtime app's tables and their indexes, compacted first (PostgreSQL: ``VACUUM
    FULL`` of those tables; SQLite: ``VACUUM`` of the file), so rows deleted are bytes given back."""
    return sum(table_bytes().values())


def table_bytes() -> dict[str, int]:
    """Bytes of each of the runtime app's tables with its indexes (``{table name: bytes}``),
    compacted first as :func:`database_bytes` says."""
    tables = _tables()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM FULL " + ", ".join(connection.ops.quote_name(t) for t in tables))
            cursor.execute("SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                           "WHERE c.relname = ANY(%s) AND c.relkind = 'r'", [tables])
            return {name: int(size) for name, size in cursor.fetchall()}
        cursor.execute("VACUUM")
        marks = ",".join("%s" for _ in tables)
        cursor.execute("SELECT s.tbl_name, coalesce(sum(d.pgsize), 0) FROM sqlite_schema s JOIN dbstat d "
                       f"ON d.name = s.name WHERE s.tbl_name IN ({marks}) GROUP BY s.tbl_name", tables)
        return {name: int(size) for name, size in cursor.fetchall()}


def _rows() -> dict[str, int]:
    return {m.__name__: m.objects.count() for m in apps.get_app_config("runtime").get_models()}


def storage_measure(*, report: BenchReport, sizes: BenchSizes, task: Path, work: Path) -> None:
    """Replay ``task`` (``sizes.commits`` commits) once; add the bytes and rows per commit. The
    bench's own ``work`` folder (the source history, the replayed clones) is not counted as var.

    Raises:
        BenchmarkError: the replay did not complete every commit.
    """
    var = Path(settings.VAR_DIR)
    tables_before, var_before, rows_before = table_bytes(), tree_bytes(var, skip_databases=True, skip=work), _rows()
    run_id = run_start(spec_path=task, worker="bench-storage")
    outcome = run_advance(run_id=run_id, worker="bench-storage")
    n = sizes.commits
    if outcome.phase != Phase.COMPLETED or outcome.cursor != n:
        raise BenchmarkError(f"the replay ended in {outcome.phase} after {outcome.cursor} writes", run_id=run_id)
    tables_after, var_after, rows_after = table_bytes(), tree_bytes(var, skip_databases=True, skip=work), _rows()
    db_before, db_after = sum(tables_before.values()), sum(tables_after.values())
    target = Path(str((Run.objects.get(run_id=run_id).spec or {}).get("target") or ""))
    clone = tree_bytes(target) if target.is_dir() else 0
    var_added = var_after - var_before
    report.facts["storage_commits"] = n
    report.facts["storage_db_bytes_per_commit"] = round((db_after - db_before) / n)
    report.facts["storage_var_bytes_per_commit"] = round(var_added / n)
    report.facts["storage_clone_bytes"] = clone
    report.facts["storage_var_to_clone"] = round(var_added / clone, 4) if clone else None
    report.facts["storage_db_bytes_per_commit_by_table"] = {
        name: round((tables_after[name] - tables_before.get(name, 0)) / n)
        for name in sorted(tables_after) if tables_after[name] != tables_before.get(name, 0)}
    report.facts["storage_rows_per_commit"] = {
        name: round((rows_after[name] - rows_before.get(name, 0)) / n, 2)
        for name in sorted(rows_after) if rows_after[name] != rows_before.get(name, 0)}


def finished_runs_make(*, work: Path, count: int) -> list[str]:
    """``count`` completed scripted workspace runs of two writes each, one workspace per run."""
    ids = []
    for i in range(count):
        spec = workspace_task(directory=work / f"run-{i}", task_id="bench-archive", writes=2)
        run_id = run_start(spec_path=spec, worker="bench-archive")
        if run_advance(run_id=run_id, worker="bench-archive").phase != Phase.COMPLETED:
            raise BenchmarkError("a run to archive did not complete", run_id=run_id)
        ids.append(run_id)
    return ids


def _live_task(directory: Path) -> Path:
    """A scripted workspace task whose second write waits for approval (a live run)."""
    (directory / "ws").mkdir(parents=True, exist_ok=True)
    path = directory / "task.toml"
    path.write_text(toml_dumps({
        "task": {"id": "bench-archive-live", "version": "1"},
        "policy": {"id": "bench-archive-live", "version": "1", "allowed_actions": ["write_file"],
                   "allowed_paths": ["**"], "approval_risks": ["high"],
                   "budgets": {"proposals": 10, "steps": 10, "wall_seconds": 864000, "cost_micros": 0}},
        "environment": {"adapter": "workspace", "target": "ws"},
        "planner": {"kind": "scripted", "steps": [{"target": "a.txt", "content": "low\n"},
                                                  {"target": "b.txt", "content": "high\n", "risk": "high"}]},
        "verifier": {"kind": "always"},
    }), encoding="utf-8")
    return path


def archive_measure(*, report: BenchReport, sizes: BenchSizes, work: Path) -> None:
    """Archive ``sizes.archive_runs`` finished runs beside a live one; add what it gave back.

    Raises:
        BenchmarkError: a run was not archived, a bundle did not verify, or the live run was
            touched or did not complete.
    """
    public_keys = work / "public-keys.json"  # verified as an auditor would: public keys only
    work.mkdir(parents=True, exist_ok=True)
    public_keys.write_text(json.dumps(public_keys_document()), encoding="utf-8")
    done = finished_runs_make(work=work, count=sizes.archive_runs)
    live = run_start(spec_path=_live_task(work / "live"), worker="bench-live")
    if run_advance(run_id=live, worker="bench-live").phase != Phase.AWAITING_APPROVAL:
        raise BenchmarkError("the live run did not stop for approval", run_id=live)
    live_before = Run.objects.values_list("state_version", "trace_seq", "trace_head").get(run_id=live)
    db_before = database_bytes()
    started = time.perf_counter()
    outcome = archive_pass(selection=ArchiveSelection(older_than=1e-6), apply=True)
    seconds = time.perf_counter() - started
    db_after = database_bytes()
    # Runs other sections finished are candidates too (the pages section's filler runs carry
    # no verifiable evidence and are skipped); every one of ours must be archived.
    if not set(done) <= set(outcome.archived):
        raise BenchmarkError(f"archived {len(set(done) & set(outcome.archived))} of {len(done)} runs",
                             skipped=len(outcome.skipped))
    bad = [run_id for run_id in done if archived_bundle_findings(run_id=run_id, public_keys=public_keys)]
    if bad:
        raise BenchmarkError(f"{len(bad)} archived bundles do not verify", run_id=bad[0])
    if Run.objects.values_list("state_version", "trace_seq", "trace_head").get(run_id=live) != live_before:
        raise BenchmarkError("the live run changed during the archive", run_id=live)
    [item] = approvals_waiting(run_ids=[live])
    approval_grant(run_id=live, approver="bench", environment_fingerprint=item.environment_fingerprint)
    if run_advance(run_id=live, worker="bench-live").phase != Phase.COMPLETED:
        raise BenchmarkError("the live run did not complete after the archive", run_id=live)
    report.facts["archive_runs"] = len(outcome.archived)
    report.facts["archive_runs_skipped"] = len(outcome.skipped)
    report.facts["archive_db_bytes_before"] = db_before
    report.facts["archive_db_bytes_after"] = db_after
    report.facts["archive_db_bytes_given_back"] = db_before - db_after
    report.facts["archive_rows_removed"] = dict(sorted(outcome.rows.items()))
    report.facts["archive_ms_per_run"] = round(seconds * 1000.0 / len(done), 1)
    report.facts["archive_bundles_verified"] = len(done)
    report.facts["archive_live_run_completed"] = True
