"""Benchmarks: what signed checkpoints, exactly-once writes and recovery cost (``manage.py bench``).

Measured by one command, never by timed unit tests (machines are shared and noisy; a threshold in
a test would only flake). Two processes take part:

* :func:`bench_run_isolated` runs in the command's own process. It never opens the user's
  database. It makes a throwaway one -- on SQLite a file in a temporary directory under
  ``RATCHET_VAR_DIR`` (the same file system as the real embedded database, so fsync costs are the
  real ones); on PostgreSQL a scratch database ``<name>_bench`` on the same server, created and
  dropped with psycopg -- and re-executes ``manage.py bench`` as a child pointed at it with a
  clean ``RATCHET_*`` environment (its own var dir, key file and media root; no separate HWM
  database, no armed crash point). Afterwards the scratch database and directory are removed.
* :func:`bench_run` runs in that child. It refuses to run unless the database it is connected to
  is the scratch database the parent named (:class:`BenchmarkScratchError`), migrates it, and
  measures each section below, returning a :class:`BenchReport`.

Sections (DESIGN.md sections 3-5 and 8 name what is measured; the numbers are for operators):

* **checkpoint commit**: ``checkpoint_commit`` of a realistic state (:func:`realistic_state`:
  30 executed git writes with full receipts, a pending commit action, a pinned 31-commit plan),
  and ``seal`` alone (validate + canonical JSON + HMAC) to split the cost between validation/
  signing and the database (fence, append, HWM compare-and-set, trace);
* **restore**: ``checkpoint_restore`` of the same run;
* **step throughput**: a git-history replay of N commits of a repository the bench builds (real
  history with adds, edits, deletes and executable files), driven in-process by ``run_advance``,
  against the same commits made by a plain loop (the same planner output written to files, then
  ``git add -A`` and ``git commit``): the ratio is what exactly-once costs;
* **recovery**: a child ``manage.py run`` SIGKILLs itself after the last write reached git but
  before anything recorded it (``RATCHET_CRASH_AT=engine.after_execute:N``); once its lease
  expires, ``run_advance`` (what ``manage.py resume`` calls) is timed in-process until the run
  completes: restore, query the adapter by key, reconcile, verify;
* **trace verify** per 1,000 events, and **peak RSS** (``resource``, via ``os.wait4``) of a child
  ``manage.py run`` replaying N commits, next to an idle ``manage.py check``;
* **attachments**: put and get throughput for 1 MiB blobs.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now

from runtime.adapters.base import Observation
from runtime.attachments import attachment_get, attachment_put
from runtime.checkpoints import checkpoint_commit, checkpoint_restore, run_create
from runtime.core.canonical import DigestKind, digest, digest_bytes
from runtime.core.checkpoint import (
    Action,
    BudgetLimits,
    BudgetUsage,
    EnvironmentRef,
    ExecutedWrite,
    PendingAction,
    Phase,
    Receipt,
    Risk,
    RunIdentity,
    RunState,
    Scope,
    VersionSet,
    seal,
)
from runtime.core.idempotency import derive_key
from runtime.core.signing import TrustRoot
from runtime.engine import run_advance, run_start
from runtime.errors import BenchmarkError, BenchmarkScratchError
from runtime.keys import keyring_for
from runtime.models import Run, TraceEvent
from runtime.planners.base import Done
from runtime.planners.git_history import GitHistoryPlanner, clone_at_base, git_env
from runtime.trace import trace_append_txn, trace_verify

MIB = 1 << 20
"""Bytes in one MiB (attachment blobs are this size)."""

SCRATCH_ENV = "RATCHET_BENCH_SCRATCH"
"""Set by the parent in the child's environment: the scratch database the child may touch (the
SQLite file path or the PostgreSQL database name). Without it the child refuses to run."""

CRASH_LEASE_SECONDS = 2.0
"""Lease time to live (seconds) of the child that is SIGKILLed in the recovery section: short,
so the resume does not wait long, but long enough that a step on a loaded machine renews it."""

PROGRESS = Callable[[str], None]


# --- sizes and the report ---------------------------------------------------------------------


@dataclass(frozen=True)
class BenchSizes:
    """How much each section measures.

    Attributes:
        commits: commits per replayed history (the step-throughput, recovery and memory runs).
        repeat: repetitions of the whole-run measurements (replay, plain git loop, recovery,
            trace verify, attachments); medians are over these.
        samples: calls per latency measurement (checkpoint commit, seal, restore).
        executed_writes: executed writes in the checkpointed state (the design's "~30").
        trace_events: events in the run whose trace is verified.
        attachments: 1 MiB blobs put and got per repetition.
    """

    commits: int = 30
    repeat: int = 5
    samples: int = 200
    executed_writes: int = 30
    trace_events: int = 2000
    attachments: int = 32

    @classmethod
    def choose(cls, *, quick: bool, commits: int | None = None,
               repeat: int | None = None) -> BenchSizes:
        """Default sizes, or the small ``--quick`` ones; ``commits`` / ``repeat`` override.

        Raises:
            BenchmarkError: ``commits`` or ``repeat`` is below 1.
        """
        base = (cls(commits=5, repeat=2, samples=20, trace_events=200, attachments=4)
                if quick else cls())
        sizes = cls(**{**asdict(base), **{k: v for k, v in
                                           (("commits", commits), ("repeat", repeat))
                                           if v is not None}})
        if sizes.commits < 1 or sizes.repeat < 1:
            raise BenchmarkError("commits and repeat must be at least 1",
                                 commits=sizes.commits, repeat=sizes.repeat)
        return sizes


@dataclass(frozen=True)
class Metric:
    """One measured quantity.

    Attributes:
        name: stable key (``checkpoint_commit_ms``, ...), used in the JSON report.
        label: what the table prints.
        unit: ``ms``, ``writes/s``, ``MiB``, ``MiB/s``.
        median: median of the samples.
        p95: 95th percentile where it says something (latencies), else ``None``.
        samples: number of samples the median is over.
    """

    name: str
    label: str
    unit: str
    median: float
    p95: float | None
    samples: int


@dataclass(frozen=True)
class Ratio:
    """A ratio of two medians, e.g. the replay's time over the plain git loop's."""

    name: str
    label: str
    value: float
    note: str


@dataclass
class BenchReport:
    """Everything one ``manage.py bench`` measured.

    Attributes:
        machine: cores, CPU, Python, platform, database engine and version, git version.
        sizes: the :class:`BenchSizes` used, as a dict.
        metrics: the measured quantities, in table order.
        ratios: ratios of medians.
        facts: sizes of what was measured (envelope bytes, trace events per replay run, ...).
        scratch: where the throwaway database lived (filled in by the parent).
    """

    machine: dict[str, Any]
    sizes: dict[str, int]
    metrics: list[Metric] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    scratch: str = ""

    def metric(self, name: str) -> Metric:
        """The metric called ``name``.

        Raises:
            KeyError: no such metric.
        """
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``metrics`` and ``ratios`` are keyed by name."""
        return {
            "machine": dict(self.machine),
            "sizes": dict(self.sizes),
            "metrics": {m.name: {k: v for k, v in asdict(m).items() if k != "name"}
                        for m in self.metrics},
            "ratios": {r.name: {k: v for k, v in asdict(r).items() if k != "name"}
                       for r in self.ratios},
            "facts": dict(self.facts),
            "scratch": self.scratch,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchReport:
        """Inverse of :meth:`as_dict` (the parent reads the child's report with it)."""
        return cls(
            machine=dict(data["machine"]),
            sizes=dict(data["sizes"]),
            metrics=[Metric(name=name, **body) for name, body in data["metrics"].items()],
            ratios=[Ratio(name=name, **body) for name, body in data["ratios"].items()],
            facts=dict(data.get("facts", {})),
            scratch=str(data.get("scratch", "")),
        )

    def render(self) -> str:
        """The table ``manage.py bench`` prints: machine, sizes, medians (p95), ratios."""
        m, s = self.machine, self.sizes
        lines = [
            "Ratchet benchmarks",
            f"machine:  {m.get('cores')} cores ({m.get('cpu') or 'cpu unknown'}), "
            f"{m.get('python')}, {m.get('platform')}",
            f"database: {m.get('database')}; git {m.get('git')}",
            f"scratch:  {self.scratch or '-'}",
            f"sizes:    {s['commits']} replayed commits, repeat {s['repeat']}, "
            f"{s['samples']} latency samples, state with {s['executed_writes']} executed writes, "
            f"{s['trace_events']} trace events, {s['attachments']} x 1 MiB attachments",
            "",
            f"{'metric':<52} {'median':>10} {'p95':>10}  unit",
        ]
        for metric in self.metrics:
            p95 = "-" if metric.p95 is None else _fmt(metric.p95)
            lines.append(f"{metric.label:<52} {_fmt(metric.median):>10} {p95:>10}  {metric.unit}")
        lines += ["", "ratios"]
        for ratio in self.ratios:
            lines.append(f"  {ratio.label:<50} {ratio.value:>10.2f}  {ratio.note}")
        if self.facts:
            lines += ["", "facts: " + ", ".join(f"{k}={v}" for k, v in sorted(self.facts.items()))]
        return "\n".join(lines)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _p95(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[94]


def _latency(name: str, label: str, seconds: list[float]) -> Metric:
    ms = [s * 1000.0 for s in seconds]
    return Metric(name=name, label=label, unit="ms", median=statistics.median(ms), p95=_p95(ms),
                  samples=len(ms))


def _rate(name: str, label: str, unit: str, values: list[float]) -> Metric:
    return Metric(name=name, label=label, unit=unit, median=statistics.median(values), p95=None,
                  samples=len(values))


# --- the parent: a throwaway database ---------------------------------------------------------


def bench_run_isolated(*, sizes: BenchSizes) -> BenchReport:
    """Run the benchmarks in a child process against a throwaway database and return its report.

    The user's database is never opened: on SQLite the scratch is a file in a temporary
    directory under ``RATCHET_VAR_DIR``; on PostgreSQL it is ``<name>_bench`` on the server that
    ``DATABASE_URL`` names, created before and dropped after (also when the child fails or the
    user interrupts). The child inherits stdout and stderr, so its progress lines show.

    Args:
        sizes: what to measure (:meth:`BenchSizes.choose`); handed to the child as JSON.

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
            url, marker = _postgres_url(db, pg_name), pg_name
            where = f"PostgreSQL database {pg_name} on the same server (dropped)"
        else:
            raise BenchmarkScratchError("only SQLite and PostgreSQL can be benchmarked",
                                        engine=engine)
        out = scratch_dir / "report.json"
        cmd = [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "bench",
               "--scratch-child", str(out), "--sizes", json.dumps(asdict(sizes))]
        proc = subprocess.Popen(cmd, env=_scratch_env(scratch_dir, url, marker),
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


def _scratch_env(scratch_dir: Path, url: str, marker: str) -> dict[str, str]:
    """The child's environment: no inherited ``RATCHET_*`` setting can point it elsewhere (a
    separate HWM database, a media root, the user's keys, an armed crash point)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RATCHET_", "CELERY_")) and k != "DATABASE_URL"}
    env.update(
        DATABASE_URL=url,
        RATCHET_VAR_DIR=str(scratch_dir / "var"),
        RATCHET_LOG_LEVEL="WARNING",  # lease take-overs are expected here; keep the table clean
        DJANGO_SETTINGS_MODULE="runtime.settings",
        PYTHONPATH=str(settings.BASE_DIR),
    )
    env[SCRATCH_ENV] = marker
    return env


def _postgres_url(db: Mapping[str, Any], name: str) -> str:
    """``DATABASE_URL`` with its database name replaced (query options such as sslmode kept)."""
    current = os.environ.get("DATABASE_URL", "")
    if current.startswith(("postgres://", "postgresql://", "pgsql://")):
        parts = urlsplit(current)
        return urlunsplit((parts.scheme, parts.netloc, "/" + quote(name), parts.query, ""))
    auth = quote(str(db.get("USER") or ""), safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(str(db["PASSWORD"]), safe="")
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{auth}@{host}:{port}/{quote(name)}"


def scratch_database_name(*, name: str) -> str:
    """``<name>_bench``, cut to PostgreSQL's 63-byte identifier limit.

    Raises:
        BenchmarkScratchError: the cut name would be the user's own database name.
    """
    scratch = name[: 63 - len("_bench")] + "_bench"
    if scratch == name:
        raise BenchmarkScratchError("the scratch database name equals the real database's",
                                    database=name)
    return scratch


@contextmanager
def _maintenance(db: Mapping[str, Any]) -> Iterator[Any]:
    """An autocommit psycopg connection for CREATE/DROP DATABASE: to the ``postgres`` maintenance
    database, or, if that is not allowed, to the user's database (only to issue those commands)."""
    import psycopg

    params = {"host": db.get("HOST") or "127.0.0.1", "port": db.get("PORT") or 5432,
              "user": db.get("USER") or None, "password": db.get("PASSWORD") or None,
              "connect_timeout": 10, "autocommit": True}
    try:
        conn = psycopg.connect(dbname="postgres", **params)
    except psycopg.OperationalError:
        conn = psycopg.connect(dbname=db["NAME"], **params)
    try:
        yield conn
    finally:
        conn.close()


def scratch_database_create(*, settings_dict: Mapping[str, Any]) -> str:
    """Create the empty scratch database ``<name>_bench`` beside ``settings_dict``'s; return it.

    Raises:
        BenchmarkScratchError: it already exists (another bench is running, or one crashed:
            the error names the database to drop by hand) or the server refused.
    """
    import psycopg
    from psycopg import sql

    name = scratch_database_name(name=str(settings_dict["NAME"]))
    try:
        with _maintenance(settings_dict) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.DuplicateDatabase:
        raise BenchmarkScratchError(
            "the scratch database already exists: another bench is running, or one was killed "
            "before it could drop it (drop it by hand once no bench is running)", database=name,
        ) from None
    except psycopg.Error as exc:
        raise BenchmarkScratchError(f"cannot create the scratch database ({type(exc).__name__})",
                                    database=name) from None
    return name


def scratch_database_drop(*, settings_dict: Mapping[str, Any], name: str) -> None:
    """Drop the scratch database ``name`` (only ever a name :func:`scratch_database_name` made).

    Raises:
        BenchmarkScratchError: ``name`` is not the scratch name for ``settings_dict``'s database,
            or the server refused (the message names the database to drop by hand).
    """
    import psycopg
    from psycopg import sql

    if name != scratch_database_name(name=str(settings_dict["NAME"])):
        raise BenchmarkScratchError("refusing to drop a database that is not the bench's scratch",
                                    database=name)
    try:
        with _maintenance(settings_dict) as conn:
            force = sql.SQL(" WITH (FORCE)") if conn.info.server_version >= 130000 else sql.SQL("")
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name))
                         + force)
    except psycopg.Error as exc:
        raise BenchmarkScratchError(
            f"cannot drop the scratch database ({type(exc).__name__}); drop it by hand",
            database=name,
        ) from None


# --- the child: measuring ---------------------------------------------------------------------


def _require_scratch() -> None:
    """Fail closed unless this process is connected to the scratch database its parent made."""
    marker = os.environ.get(SCRATCH_ENV, "")
    db = settings.DATABASES["default"]
    name = str(db.get("NAME", ""))
    engine = str(db.get("ENGINE", ""))
    if not marker:
        raise BenchmarkScratchError(
            f"refusing to benchmark outside a throwaway database: {SCRATCH_ENV} is not set",
            database=Path(name).name,
        )
    if engine.endswith("sqlite3"):
        path = Path(name).resolve()
        # Also the shape bench_run_isolated gives it: <var>/bench-XXXX/bench.sqlite3.
        ok = (path == Path(marker).resolve() and path.name == "bench.sqlite3"
              and path.parent.name.startswith("bench-"))
    else:
        ok = name == marker and name.endswith("_bench")
    if not ok or "hwm" in settings.DATABASES:
        raise BenchmarkScratchError(
            "refusing to benchmark outside a throwaway database: connected to another database "
            "than the bench's scratch", database=Path(name).name,
        )


def bench_run(*, sizes: BenchSizes, progress: PROGRESS | None = None) -> BenchReport:
    """Migrate the scratch database and run every section; return the report.

    Only runs in the child :func:`bench_run_isolated` starts.

    Args:
        sizes: what to measure.
        progress: called with a short line before each section (the command prints it to stderr).

    Raises:
        BenchmarkScratchError: not connected to the scratch database the parent named.
        BenchmarkError: a section could not measure (a replay did not complete, a recovery
            froze, a child failed, the plain loop produced another tree).
    """
    from django.core.management import call_command

    _require_scratch()
    say = progress or (lambda _line: None)
    call_command("migrate", verbosity=0, interactive=False)
    work = Path(settings.VAR_DIR) / "work"
    work.mkdir(parents=True, exist_ok=True)
    report = BenchReport(machine=machine_info(), sizes=asdict(sizes))

    say(f"checkpoint commit / seal / restore: {sizes.samples} samples each")
    _bench_checkpoints(report, sizes)

    say(f"building a {sizes.commits + 1}-commit source history")
    source = work / "source"
    build_source_history(path=source, commits=sizes.commits)
    task = write_replay_task(directory=work / "replay", source=source, commits=sizes.commits)

    say(f"step throughput: replay of {sizes.commits} commits vs plain git, x{sizes.repeat}")
    _bench_replay(report, sizes, source=source, task=task, work=work)

    say(f"recovery: SIGKILL at the last write, resume until completed, x{sizes.repeat}")
    _bench_recovery(report, sizes, task=task)

    say("peak RSS: child `manage.py run` of the replay, and an idle `manage.py check`")
    _bench_memory(report, sizes, task=task)

    say(f"trace verify: {sizes.trace_events} events, x{max(3, sizes.repeat)}")
    _bench_trace(report, sizes)

    say(f"attachments: {sizes.attachments} x 1 MiB put/get, x{sizes.repeat}")
    _bench_attachments(report, sizes)
    return report


def machine_info() -> dict[str, Any]:
    """Cores, CPU model (Linux), Python, platform, database engine + version, git version."""
    cpu = ""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        for line in cpuinfo.splitlines():
            if line.startswith("model name"):
                cpu = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    if connection.vendor == "sqlite":
        database = (f"SQLite {connection.Database.sqlite_version} "
                    "(WAL, synchronous=FULL, IMMEDIATE transactions)")
    else:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            database = f"PostgreSQL {cursor.fetchone()[0]}"
    try:
        git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False,
                             env=git_env()).stdout.strip().removeprefix("git version ")
    except OSError:
        git = "not found"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "database": database,
        "database_vendor": connection.vendor,
        "git": git,
    }


# --- a realistic checkpointed state -----------------------------------------------------------


def _sha(*parts: object) -> str:
    """A deterministic 40-hex stand-in for a git object id."""
    return hashlib.sha1(":".join(map(str, parts)).encode(), usedforsecurity=False).hexdigest()


def _commit_action(run_id: str, cursor: int) -> Action:
    """A commit action shaped like the git-history planner's: message, author, five changes."""
    changes: list[Any] = [{"op": "delete", "path": f"src/old_{cursor:04d}.py"}]
    changes += [{"op": "write", "path": f"src/pkg_{cursor % 7}/module_{cursor:04d}_{i}.py",
                 "content": digest_bytes(f"{run_id}:{cursor}:{i}".encode()),
                 "executable": i == 3} for i in range(4)]
    return Action(kind="commit", target="", risk=Risk.LOW, params={
        "message": f"Change {cursor}: rework module {cursor % 7}\n\nLonger explanation of why the "
                   f"change was made, wrapped at seventy-two columns as usual.\n",
        "author_name": "Ada Lovelace",
        "author_email": "ada@example.org",
        "author_date": (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=cursor)).isoformat(),
        "changes": changes,
    })


def realistic_state(*, executed: int = 30, run_id: str | None = None) -> RunState:
    """A valid ``pending`` run state shaped like a git-history replay after ``executed`` writes.

    It holds ``executed`` executed writes with full git receipts (namespace, adapter version,
    commit id, tree, parent, fencing token, commit time), a pending commit action with its
    pre-state and expected post-state fingerprint, a pinned plan of ``executed + 1`` commits in
    the planner state, and an environment reference with two attachment digests -- what a real
    checkpoint carries (DESIGN.md section 3).

    Args:
        executed: number of executed writes (>= 0).
        run_id: the run id (default: a fresh uuid4 hex).
    """
    run_id = run_id or uuid.uuid4().hex
    instance = f"git-{_sha(run_id, 'instance')[:16]}"
    heads = [_sha(run_id, "commit", i) for i in range(executed + 1)]
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def env_ref(version: str, n: int) -> EnvironmentRef:
        return EnvironmentRef(
            adapter_kind="git", instance_id=instance, version=version,
            state_fingerprint=digest(DigestKind.ENVIRONMENT, {"head": version}),
            adapter_generation=1, observation_version=n,
            attachments=[digest_bytes(f"{version}:{k}".encode()) for k in ("listing", "status")],
        )

    writes = []
    for cursor in range(executed):
        action = _commit_action(run_id, cursor)
        key = derive_key(run_id=run_id, cursor=cursor, replan_epoch=0)
        receipt = Receipt(
            namespace=f"git:{instance}", adapter_version="ratchet-git/1",
            receipt_id=heads[cursor + 1],
            idempotency_key=key, intent_digest=action.intent_digest(),
            result={"commit": heads[cursor + 1], "tree": _sha(run_id, "tree", cursor),
                    "parent": heads[cursor]},
            environment_version_after=heads[cursor + 1], fencing_token=1,
            committed_at=start + timedelta(seconds=cursor), business_object=heads[cursor + 1],
        )
        writes.append(ExecutedWrite(
            idempotency_key=key, intent_digest=receipt.intent_digest, cursor=cursor,
            receipt=receipt, receipt_fingerprint=receipt.fingerprint(),
            result_summary="commit",
        ))
    environment = env_ref(heads[executed], executed + 1)
    action = _commit_action(run_id, executed)
    pending = PendingAction(
        action=action, intent_digest=action.intent_digest(),
        idempotency_key=derive_key(run_id=run_id, cursor=executed, replan_epoch=0),
        cursor=executed, replan_epoch=0, pre_state=environment.model_copy(deep=True),
        expected_post_fingerprint=digest(DigestKind.ENVIRONMENT, {"after": executed}),
        proposed_at=start + timedelta(seconds=executed),
    )
    plan = [_sha(run_id, "source", i) for i in range(executed + 1)]
    return RunState(
        identity=RunIdentity(
            run_id=run_id, tenant_id="bench", task_id="bench-checkpoint", task_version="1",
            policy_id="bench-replay", policy_version="1",
            scenario_fingerprint=digest(DigestKind.SCENARIO, {"bench": run_id}),
        ),
        versions=VersionSet(model="none", prompt="none", rules="replay-v1",
                            tool_schema="git-commit-v1"),
        phase=Phase.PENDING,
        cursor=executed,
        limits=BudgetLimits(proposals=executed + 10, steps=executed + 10, wall_seconds=3600.0,
                            cost_micros=0),
        usage=BudgetUsage(proposals=executed + 1, steps=executed, wall_seconds=12.5),
        environment=environment,
        pending=pending,
        executed=writes,
        scope=Scope(allowed_actions=["commit"], allowed_paths=["**"], permissions=["git.commit"],
                    approval_risks=[Risk.HIGH], principal="agent@bench", policy_version="1"),
        planner_state={"kind": "git-history", "source": "../source",
                       "range": f"last:{executed + 1}",
                       "base": _sha(run_id, "base"), "tip": plan[-1], "commits": list(plan)},
        started_at=start,
    )


def _bench_checkpoints(report: BenchReport, sizes: BenchSizes) -> None:
    state = realistic_state(executed=sizes.executed_writes)
    ident = state.identity
    created = run_create(state=state, worker="bench-checkpoint", ttl_seconds=3600.0,
                         spec={"bench": "checkpoint"}, events=[("run.started", {"bench": True})])
    lease, generation = created.lease, created.generation
    last = state.executed[-1] if state.executed else None
    # One event per commit, as the engine's write.executed carries: the receipt and its digests.
    event = ("write.executed", {
        "idempotency_key": last.idempotency_key if last else "",
        "receipt": last.receipt.model_dump(mode="json") if last else {},
        "receipt_fingerprint": last.receipt_fingerprint if last else "",
    })
    commits: list[float] = []
    for i in range(sizes.samples + 3):
        started = time.perf_counter()
        result = checkpoint_commit(lease=lease, state=state, expected_generation=generation,
                                   events=[event])
        elapsed = time.perf_counter() - started
        lease, generation = result.lease, result.generation
        if i >= 3:  # the first commits warm caches and connections
            commits.append(elapsed)
    keyring = keyring_for(TrustRoot.CHECKPOINT)
    seals: list[float] = []
    raw = b""
    for _ in range(sizes.samples):
        started = time.perf_counter()
        raw, _envelope = seal(state, generation=generation + 1, keyring=keyring)
        seals.append(time.perf_counter() - started)
    restores: list[float] = []
    for _ in range(sizes.samples):
        started = time.perf_counter()
        restored = checkpoint_restore(run_id=ident.run_id,
                                      scenario_fingerprint=ident.scenario_fingerprint,
                                      task_version=ident.task_version,
                                      policy_version=ident.policy_version, versions=state.versions)
        restores.append(time.perf_counter() - started)
        if restored.generation != generation:
            raise BenchmarkError("restore returned another generation than the last commit",
                                 run_id=ident.run_id, generation=restored.generation)
    n = sizes.executed_writes
    commit = _latency("checkpoint_commit_ms", f"checkpoint commit ({n} writes + pending)", commits)
    sealed = _latency("checkpoint_seal_ms", "  of which seal alone (validate + sign)", seals)
    report.metrics += [commit, sealed,
                       _latency("checkpoint_restore_ms", "checkpoint restore (verify + load)",
                                restores)]
    share = sealed.median / commit.median
    report.ratios.append(Ratio(
        name="seal_share_of_commit", label="seal / full checkpoint commit", value=share,
        note=(f"{share:.0%} validate + sign, {1 - share:.0%} database "
              "(fence, append, HWM CAS, trace)"),
    ))
    report.facts["checkpoint_envelope_bytes"] = len(raw)


# --- the source history and the replay task ---------------------------------------------------

_WORDS = ("ratchet checkpoint lease fence receipt intent digest replay commit tree branch "
          "approval reviewer generation trace evidence adapter planner verifier budget").split()


def _text(rng: random.Random, size: int) -> str:
    lines, total = [], 0
    while total < size:
        line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 12))) + "\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)


def _git(repo: Path, *args: str, input: bytes | None = None, **extra: str) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True,
                          env={**git_env(), **extra}, check=False)
    if proc.returncode != 0:
        first = proc.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise BenchmarkError(f"git {args[0]} failed: {first[0] if first else proc.returncode}")
    return proc.stdout.decode("utf-8", "replace")


_COMMITTER = {"GIT_COMMITTER_NAME": "Bench Bot", "GIT_COMMITTER_EMAIL": "bench@example.org",
              "GIT_COMMITTER_DATE": "2025-06-01T00:00:00+00:00"}


def build_source_history(*, path: Path, commits: int) -> list[str]:
    """Build a git repository at ``path``: a root commit of 12 files, then ``commits`` commits.

    Every commit edits two files and adds one; every third also deletes one, every fifth adds
    an executable script in a nested directory. Content and dates are deterministic.

    Args:
        path: a directory that does not exist yet.
        commits: commits after the root (>= 1).

    Returns:
        The ``commits`` commit ids after the root, oldest first.

    Raises:
        BenchmarkError: git failed.
    """
    rng = random.Random(8785)
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    files: list[str] = []

    def write(rel: str, text: str, mode: int = 0o644) -> None:
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        target.chmod(mode)

    def commit(message: str, n: int) -> str:
        _git(path, "add", "-A")
        date = (datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=n)).isoformat()
        _git(path, "commit", "-q", "--allow-empty", "-F", "-", input=message.encode(),
             GIT_AUTHOR_NAME="Ada Lovelace", GIT_AUTHOR_EMAIL="ada@example.org",
             GIT_AUTHOR_DATE=date, **_COMMITTER)
        return _git(path, "rev-parse", "HEAD").strip()

    for i in range(12):
        rel = f"src/module_{i:02d}.py"
        write(rel, _text(rng, rng.randint(2048, 8192)))
        files.append(rel)
    write("README.md", "# Bench source\n")
    commit("Initial import\n", 0)
    made = []
    for n in range(1, commits + 1):
        for rel in rng.sample(files, k=min(2, len(files))):
            write(rel, _text(rng, rng.randint(2048, 8192)))
        rel = f"{rng.choice(['src', 'docs', 'data/nested/deep'])}/file_{n:04d}.txt"
        write(rel, _text(rng, rng.randint(512, 4096)))
        files.append(rel)
        if n % 3 == 0 and len(files) > 4:
            gone = rng.choice(files)
            files.remove(gone)
            (path / gone).unlink()
        if n % 5 == 0:
            write(f"scripts/tools/tool_{n:04d}.sh", f"#!/bin/sh\necho tool {n}\n", mode=0o755)
        made.append(commit(f"Change {n}\n\nEdit two files, add one; sometimes delete.\n", n))
    return made


def write_replay_task(*, directory: Path, source: Path, commits: int) -> Path:
    """Write a git-history replay task of ``source``'s last ``commits`` commits; return its path.

    Each run replays into ``directory/targets/<run id>`` (a fresh clone at the base).
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "task.toml"
    path.write_text(f"""\
[task]
id = "bench-replay"
version = "1"

[versions]
model = "none"
prompt = "none"
rules = "replay-v1"
tool_schema = "git-commit-v1"

[policy]
id = "bench-replay"
version = "1"
allowed_actions = ["commit"]
allowed_paths = ["**"]
permissions = ["git.commit"]
approval_risks = ["high"]

[policy.budgets]
proposals = {commits + 10}
steps = {commits + 10}
wall_seconds = 86400
cost_micros = 0

[environment]
adapter = "git"
target = "targets"
setup = "clone-at-base"

[planner]
kind = "git-history"
source = {json.dumps(str(source))}
range = "last:{commits}"

[verifier]
kind = "tree-equals-source"
""", encoding="utf-8")
    return path


# --- step throughput --------------------------------------------------------------------------


def _prune_empty_parents(root: Path, path: Path) -> None:
    parent = path.parent
    while parent != root and parent.is_dir() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def plain_git_replay(*, source: Path, commits: int, target: Path) -> float:
    """Make the same commits without Ratchet; return the seconds the commit loop took.

    The same planner proposes the same actions (reading the source's diffs and blobs); each is
    written to files by hand and committed with ``git add -A`` and ``git commit``. No checkpoint,
    no receipt, no fencing: the baseline that exactly-once is compared against. The clone at the
    base is made before the clock starts.

    Raises:
        BenchmarkError: git failed, or the loop's tree differs from the source tip's.
    """
    planner = GitHistoryPlanner(source=source, range=f"last:{commits}")
    state = planner.init_state()
    clone_at_base(source=source, base=str(state["base"]), target=target)
    blobs: dict[str, bytes] = {}

    def put(data: bytes) -> str:
        key = digest_bytes(data)
        blobs[key] = data
        return key

    seen = Observation(instance_id="plain", version="v0", kind="git",
                       state_fingerprint=digest(DigestKind.ENVIRONMENT, {"plain": True}))
    started = time.perf_counter()
    for cursor in range(commits):
        action = planner.propose(cursor=cursor, planner_state=state, observation=seen, put_blob=put)
        if isinstance(action, Done):
            raise BenchmarkError("the planner stopped early", cursor=cursor)
        params: dict[str, Any] = dict(action.params)
        for change in params["changes"]:
            file = target / change["path"]
            if change["op"] == "delete":
                file.unlink()
                _prune_empty_parents(target, file)
            else:
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(blobs[change["content"]])
                file.chmod(0o755 if change["executable"] else 0o644)
        _git(target, "add", "-A")
        _git(target, "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F", "-",
             input=str(params["message"]).encode(), GIT_AUTHOR_NAME=str(params["author_name"]),
             GIT_AUTHOR_EMAIL=str(params["author_email"]),
             GIT_AUTHOR_DATE=str(params["author_date"]), **_COMMITTER)
    elapsed = time.perf_counter() - started
    tip_tree = _git(source, "rev-parse", f"{state['tip']}^{{tree}}").strip()
    if _git(target, "rev-parse", "HEAD^{tree}").strip() != tip_tree:
        raise BenchmarkError("the plain git loop produced another tree than the source tip")
    return elapsed


def _bench_replay(report: BenchReport, sizes: BenchSizes, *, source: Path, task: Path,
                  work: Path) -> None:
    ratchet: list[float] = []
    plain: list[float] = []
    events: list[int] = []
    for i in range(sizes.repeat):
        run_id = run_start(spec_path=task, worker="bench-replay")
        started = time.perf_counter()
        outcome = run_advance(run_id=run_id, worker="bench-replay")
        ratchet.append(time.perf_counter() - started)
        if outcome.phase != Phase.COMPLETED or outcome.cursor != sizes.commits:
            raise BenchmarkError(
                f"the replay ended in {outcome.phase} after {outcome.cursor} writes",
                run_id=run_id)
        events.append(TraceEvent.objects.filter(run_id=run_id).count())
        plain.append(plain_git_replay(source=source, commits=sizes.commits,
                                      target=work / f"plain-{i}"))
    n = sizes.commits
    report.metrics += [
        _rate("replay_writes_per_second", f"step throughput: replay of {n} commits", "writes/s",
              [n / s for s in ratchet]),
        _rate("replay_ms_per_write", "  per exactly-once write (2 checkpoints each)", "ms",
              [s * 1000.0 / n for s in ratchet]),
        _rate("git_ms_per_commit", "  plain `git commit` loop, per commit", "ms",
              [s * 1000.0 / n for s in plain]),
    ]
    overhead = statistics.median(ratchet) / statistics.median(plain)
    report.ratios.append(Ratio(
        name="replay_vs_plain_git", label="replay / plain git commit loop", value=overhead,
        note="x the time: what exactly-once (checkpoints, receipts, fencing, trace) costs",
    ))
    report.facts["trace_events_per_replay_run"] = statistics.median(events)


# --- recovery ---------------------------------------------------------------------------------


def _manage(*args: str) -> list[str]:
    return [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args]


def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RATCHET_CRASH_AT"}
    env.update(extra)
    return env


def _wait_lease_expired(run_id: str, *, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not Run.objects.filter(run_id=run_id, lease_expires_at__lt=Now()).exists():
        if time.monotonic() > deadline:
            raise BenchmarkError("the killed child's lease did not expire", run_id=run_id)
        time.sleep(0.02)


def _bench_recovery(report: BenchReport, sizes: BenchSizes, *, task: Path) -> None:
    total: list[float] = []
    restore: list[float] = []
    for _ in range(sizes.repeat):
        proc = subprocess.run(
            _manage("run", str(task), "--no-progress"),
            env=_child_env(RATCHET_CRASH_AT=f"engine.after_execute:{sizes.commits}",
                           RATCHET_LEASE_SECONDS=str(CRASH_LEASE_SECONDS)),
            cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=3600, check=False,
        )
        first = (proc.stdout.splitlines() or [""])[0].split()
        if proc.returncode != -signal.SIGKILL or len(first) != 2 or first[0] != "run":
            tail = proc.stderr.strip().splitlines()[-1:]
            raise BenchmarkError(f"the crashing child did not die at its crash point: "
                                 f"{tail[0] if tail else ''}"[:500], exit_code=proc.returncode)
        run_id = first[1]
        _wait_lease_expired(run_id)
        started = time.perf_counter()
        outcome = run_advance(run_id=run_id, worker="bench-recovery", wait_seconds=5.0)
        total.append(time.perf_counter() - started)
        if outcome.phase != Phase.COMPLETED or not outcome.recovered:
            raise BenchmarkError(f"the resumed run ended in {outcome.phase}, "
                                 f"recovered={outcome.recovered}", run_id=run_id)
        audit = (TraceEvent.objects.filter(run_id=run_id, event_type="audit.effects")
                 .order_by("-seq").values_list("payload", flat=True).first()) or {}
        if audit.get("duplicates", 1) != 0 or audit.get("keys") != sizes.commits:
            raise BenchmarkError("the recovered run's audit is not exactly once", run_id=run_id)
        recovered = (TraceEvent.objects.filter(run_id=run_id, event_type="recovery.succeeded")
                     .order_by("-seq").values_list("payload", flat=True).first()) or {}
        restore.append(float(recovered.get("duration_seconds", 0.0)))
    report.metrics += [
        _latency("recovery_ms", "recovery: resume after SIGKILL until completed", total),
        _latency("recovery_restore_ms", "  of which restore + re-observe (trace)", restore),
    ]


# --- memory -----------------------------------------------------------------------------------


_LAUNCHER = (
    "import os, subprocess, sys\n"
    "proc = subprocess.Popen(sys.argv[1:])\n"
    "_pid, status, usage = os.wait4(proc.pid, 0)\n"
    "proc.returncode = os.waitstatus_to_exitcode(status)\n"
    "print('peak-rss', usage.ru_maxrss, flush=True)\n"
    "sys.exit(max(proc.returncode, 0) if proc.returncode >= 0 else 1)\n"
)
"""Runs a command and prints its ``ru_maxrss`` (from ``os.wait4``). Linux carries a process's
peak RSS across ``exec`` from the process it was forked from, so measuring a child of this
(large) process directly would report this process's size; forking it from a bare interpreter
keeps that floor at a few MiB, far below any Django process."""


def _peak_rss_mib(cmd: list[str], *, what: str) -> float:
    """Run ``cmd`` to completion and return its peak resident set size in MiB.

    Raises:
        BenchmarkError: the command failed.
    """
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], env=_child_env(),
                          cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=3600,
                          check=False)
    peaks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("peak-rss ")]
    if proc.returncode != 0 or len(peaks) != 1:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]
        raise BenchmarkError(f"{what} failed: {tail[0] if tail else ''}"[:500],
                             exit_code=proc.returncode)
    # ru_maxrss is KiB on Linux and bytes on macOS.
    return int(peaks[0]) / (MIB if sys.platform == "darwin" else 1024)


def _bench_memory(report: BenchReport, sizes: BenchSizes, *, task: Path) -> None:
    replay = _peak_rss_mib(_manage("run", str(task), "--no-progress"), what="the replay child")
    idle = _peak_rss_mib(_manage("check"), what="the idle child")
    report.metrics += [
        _rate("replay_peak_rss_mib", f"peak RSS: `manage.py run` of {sizes.commits} commits",
              "MiB", [replay]),
        _rate("idle_peak_rss_mib", "  idle `manage.py check`, for comparison", "MiB", [idle]),
    ]


# --- trace ------------------------------------------------------------------------------------


def _bench_trace(report: BenchReport, sizes: BenchSizes) -> None:
    state = realistic_state(executed=0)
    run_create(state=state, worker="bench-trace", ttl_seconds=3600.0)
    run_id = state.identity.run_id
    receipt = realistic_state(executed=1, run_id=run_id).executed[0].receipt.model_dump(mode="json")
    left, seq = sizes.trace_events, 0
    while left > 0:
        # Appended in batches under the run row lock: how they got there does not change what
        # verifying them costs, and single appends would make setup dominate the bench.
        with transaction.atomic():
            Run.objects.select_for_update().filter(run_id=run_id).exists()
            for _ in range(min(500, left)):
                seq += 1
                trace_append_txn(run_id=run_id, event_type="write.executed",
                                 payload={"n": seq, "receipt": receipt},
                                 environment_version=receipt["environment_version_after"])
                left -= 1
    per_thousand: list[float] = []
    for _ in range(max(3, sizes.repeat)):
        started = time.perf_counter()
        chain = trace_verify(run_id=run_id)
        elapsed = time.perf_counter() - started
        if not chain.ok:
            raise BenchmarkError(f"the trace does not verify: {chain.reason}", run_id=run_id)
        per_thousand.append(elapsed / chain.count * 1000.0)
    report.metrics.append(_latency("trace_verify_ms_per_1000_events",
                                   "trace verify, per 1,000 events", per_thousand))


# --- attachments ------------------------------------------------------------------------------


def _bench_attachments(report: BenchReport, sizes: BenchSizes) -> None:
    puts: list[float] = []
    gets: list[float] = []
    for _ in range(sizes.repeat):
        # Fresh random bytes every time: putting known content is a no-op by design.
        blobs = [os.urandom(MIB) for _ in range(sizes.attachments)]
        started = time.perf_counter()
        digests = [attachment_put(data=blob) for blob in blobs]
        puts.append(len(blobs) / (time.perf_counter() - started))
        started = time.perf_counter()
        for d, blob in zip(digests, blobs, strict=True):
            if len(attachment_get(digest=d)) != len(blob):
                raise BenchmarkError("attachment came back with another size", digest=d)
        gets.append(len(blobs) / (time.perf_counter() - started))
    report.metrics += [
        _rate("attachment_put_mib_per_s", "attachment put, 1 MiB blobs", "MiB/s", puts),
        _rate("attachment_get_mib_per_s", "attachment get (re-hashed), 1 MiB blobs", "MiB/s", gets),
    ]


__all__ = [
    "BenchReport",
    "BenchSizes",
    "Metric",
    "Ratio",
    "bench_run",
    "bench_run_isolated",
    "build_source_history",
    "machine_info",
    "plain_git_replay",
    "realistic_state",
    "scratch_database_create",
    "scratch_database_drop",
    "scratch_database_name",
    "write_replay_task",
]
