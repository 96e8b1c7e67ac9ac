"""The parent half of ``manage.py bench``: measure in a child pointed at a throwaway database."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from django.conf import settings

from runtime.bench.children import manage_argv
from runtime.bench.peers import peer_python
from runtime.bench.report import BenchReport
from runtime.bench.scratch import (
    BROKER_ENV,
    PEER_PYTHON_ENV,
    scratch_database_create,
    scratch_database_drop,
    scratch_env,
    scratch_postgres_url,
)
from runtime.bench.sizes import BenchSizes
from runtime.errors import BenchmarkError, BenchmarkScratchError


def _say(line: str) -> None:
    print(f"bench: {line}", file=sys.stderr, flush=True)


def bench_run_isolated(*, sizes: BenchSizes, history: Path | None = None) -> BenchReport:
    """Run the benchmarks in a child process against a throwaway database and return its report.

    The user's database is never opened: on SQLite the scratch is a file in a temporary
    directory under ``RATCHET_VAR_DIR``; on PostgreSQL it is ``<name>_bench`` on the server that
    ``DATABASE_URL`` names, created before and dropped after (also when the child fails or the
    user interrupts). The child inherits stdout and stderr, so its progress lines show. With the
    ``scale`` section, the DBOS peer's virtual environment is made (or reused) first under
    ``RATCHET_VAR_DIR/bench/peers/`` (:mod:`runtime.bench.peers`); if that fails, the section
    measures Ratchet alone.

    Args:
        sizes: what to measure (:meth:`BenchSizes.choose`); handed to the child as JSON.
        history: a git repository whose last ``sizes.commits`` commits the replay section
            replays (None: a generated history).

    Raises:
        BenchmarkScratchError: the scratch database cannot be created (for example it already
            exists: a bench is running or crashed) or the engine is neither SQLite nor PostgreSQL.
        BenchmarkError: the child failed; its output explains why.
    """
    db = settings.DATABASES["default"]
    engine = str(db.get("ENGINE", ""))
    try:
        scratch_dir = Path(tempfile.mkdtemp(prefix="bench-", dir=settings.VAR_DIR))
    except OSError as exc:
        raise BenchmarkScratchError(f"cannot make a scratch directory ({type(exc).__name__})",
                                    var_dir=str(settings.VAR_DIR)) from None
    pg_name: str | None = None
    try:
        if engine.endswith("sqlite3"):
            path = scratch_dir / "bench.sqlite3"
            url, marker = f"sqlite:///{path}", str(path)
            where = ("SQLite file in a temporary directory under "
                     f"{Path(settings.VAR_DIR).name}/ (removed)")
        elif engine.endswith("postgresql"):
            pg_name = scratch_database_create(settings_dict=db)
            url, marker = scratch_postgres_url(db=db, name=pg_name), pg_name
            where = f"PostgreSQL database {pg_name} on the same server (dropped)"
        else:
            raise BenchmarkScratchError("only SQLite and PostgreSQL can be benchmarked",
                                        engine=engine)
        out = scratch_dir / "report.json"
        cmd = manage_argv("bench", "--scratch-child", str(out), "--sizes",
                          json.dumps(asdict(sizes)))
        if history is not None:
            cmd += ["--history", str(history)]
        extra = {}
        broker = str(settings.CELERY_BROKER_URL)
        if not os.environ.get(BROKER_ENV) and not broker.split("://", 1)[0].startswith(
                ("sqla+", "sqlalchemy+")):
            # A server broker the user configured (Redis, RabbitMQ) is what the workers measure on.
            extra[BROKER_ENV] = broker
        if "scale" in sizes.sections:
            try:
                extra[PEER_PYTHON_ENV] = str(peer_python(name="dbos", var_dir=Path(settings.VAR_DIR),
                                                         say=_say))
            except BenchmarkError as exc:
                # Ratchet's figures are still worth having; the report says the peer is missing.
                _say(f"the DBOS peer is left out: {exc}")
        proc = subprocess.Popen(cmd, env=scratch_env(scratch_dir=scratch_dir, url=url,
                                                     marker=marker, extra=extra),
                                cwd=settings.BASE_DIR)
        try:
            code = proc.wait()
        except BaseException:
            proc.kill()  # our own child, by pid
            proc.wait()
            raise
        if code != 0 or not out.exists():
            raise BenchmarkError("the measuring child process failed", exit_code=code)
        report = BenchReport.from_dict(json.loads(out.read_text(encoding="utf-8")))
        report.scratch = where
        return report
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)
        if pg_name is not None:
            try:
                scratch_database_drop(settings_dict=db, name=pg_name)
            except BenchmarkScratchError as exc:
                # Raising here would hide why the bench stopped; say what is left behind instead.
                print(f"bench: {exc}", file=sys.stderr, flush=True)
