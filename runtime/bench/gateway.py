"""The agent gateway's benchmark: call overhead over a direct adapter call, and calls per second.

``manage.py bench_gateway [--calls N] [--clients 1,8,32]`` (DESIGN.md section 5.12). The parent
makes a throwaway SQLite file or PostgreSQL ``<name>_bench`` database exactly as ``manage.py
bench`` does (``runtime.bench.scratch``) and re-executes itself against it; the child refuses to
measure anywhere else (:func:`~runtime.bench.scratch.scratch_require`). Measured in the child:

* a direct workspace adapter write (``execute`` with a fresh key), N times: median and p95;
* the same write as a gateway call (``call_submit``: token, policy, lease, restore, intent
  checkpoint, execute, receipt checkpoint), N times on one run: median and p95, and the
  overhead (gateway median minus direct median);
* the same write through the JSON API (Django's request handling, no socket), N times, and the
  engine's own write action of the same write (a scripted workspace run, one commit per write):
  medians, and each gateway surface's median over the engine's (``ratio_to_engine_write``);
* calls per second with 1, 8 and 32 concurrent clients, each driving its own run with its own
  token (one run's calls are serialised by its lease by design), as threads of one process and
  spread over ``--processes`` processes (``runtime.bench.gateway_throughput``);
* the engine's write action with two checkpoints per write (``RATCHET_FOLD_INTENTS`` off for
  that run), as a gateway call has: its proposal waits for the caller (DESIGN.md section 4.13);
* the counts of one call (:mod:`runtime.bench.gateway_counts`): statements, round trips and
  durable transactions on every database it touches (the main one and the high-water mark
  store) and client fsyncs, in-process, through the JSON API and through MCP, beside the
  direct adapter write and the engine's write action of the same write (counts, not times).

The child gets the parent's ``RATCHET_GATEWAY_*`` settings (every other ``RATCHET_*`` one is
dropped, as for ``manage.py bench``), with the per-token rate limit raised to what ``--calls``
needs (:func:`gateway_child_settings`), so any number of calls runs.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import Client as HttpClient
from django.test.utils import override_settings

from runtime.adapters.factory import open_adapter
from runtime.bench.children import manage_argv
from runtime.bench.gateway_counts import UNITS, gateway_counts
from runtime.bench.gateway_throughput import throughput_measure
from runtime.bench.scratch import (
    scratch_database_create,
    scratch_database_drop,
    scratch_env,
    scratch_postgres_url,
)
from runtime.bench.write_counts import workspace_task
from runtime.core.checkpoint import Action, Phase
from runtime.engine import StepReport, run_advance, run_start
from runtime.errors import BenchmarkError, BenchmarkScratchError
from runtime.evidence.attachments import attachment_blob, attachment_put
from runtime.gateway.calls import call_submit
from runtime.gateway.tokens import token_issue
from runtime.taskspec.writing import toml_dumps

TASK = toml_dumps({
    "task": {"id": "bench-gateway", "version": "1"},
    "policy": {"id": "bench", "version": "1", "allowed_actions": ["write_file"], "allowed_paths": ["notes/**"],
               "approval_risks": ["high"],
               "budgets": {"proposals": 100000, "steps": 100000, "wall_seconds": 100000, "cost_micros": 0}},
    "environment": {"adapter": "workspace", "target": "ws"},
    "planner": {"kind": "python", "entry": "runtime.planners.external:ExternalPlanner", "max_calls": 300,
                "risks": {"write_file": "low"}},
    "verifier": {"kind": "always"},
})
"""The task of every benchmark run: an external planner (the gateway's calls) writing notes."""


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"median_ms": round(statistics.median(ordered) * 1000, 3), "p95_ms": round(p95 * 1000, 3),
            "n": len(ordered)}


def _new_run(root: Path, name: str) -> tuple[str, str]:
    directory = root / name
    (directory / "ws").mkdir(parents=True)
    (directory / "task.toml").write_text(TASK, encoding="utf-8")
    run_id = run_start(spec_path=directory / "task.toml", worker="bench-gateway")
    return run_id, token_issue(run_id=run_id, agent="bench").token


def gateway_measure(*, calls: int, clients: list[int], root: Path, processes: int = 2) -> dict[str, Any]:
    """Measure in this process (connected to the scratch database); returns the report dict.

    ``processes``: besides one process, calls per second are also measured with the clients
    spread over this many processes (``runtime.bench.gateway_throughput``).

    Raises:
        BenchmarkError: a call did not execute.
    """
    direct_ws = root / "direct"
    direct_ws.mkdir()
    adapter = open_adapter("workspace", direct_ws)
    direct = []
    for i in range(calls):
        digest = attachment_put(data=f"note {i}\n".encode())
        action = Action(kind="write_file", target=f"notes/{i}.txt", params={"content": digest, "executable": False})
        started = time.perf_counter()
        adapter.execute(action, idempotency_key=f"bench-direct-{i}", intent_digest=action.intent_digest(),
                        fencing_token=1, blobs=attachment_blob)
        direct.append(time.perf_counter() - started)
    run_id, token = _new_run(root, "latency")
    gateway = []
    for i in range(calls):
        started = time.perf_counter()
        result = call_submit(run_id=run_id, call_id=f"c{i}", tool="write_file",
                             arguments={"path": f"notes/{i}.txt", "content": f"note {i}\n"}, token=token)
        gateway.append(time.perf_counter() - started)
        if result.status != "executed":
            raise BenchmarkError("a gateway call did not execute", status=result.status)
    report: dict[str, Any] = {"direct": _quantiles(direct), "gateway": _quantiles(gateway),
                              "json_api": _quantiles(_json_calls(root, calls)),
                              "engine_write": _quantiles(_engine_writes(root, calls)),
                              "per_call": gateway_counts(run_id=run_id, token=token, root=root)}
    with override_settings(RATCHET_FOLD_INTENTS=False):
        report["engine_write_two_checkpoints"] = _quantiles(_engine_writes(root, calls, name="unfolded"))
    report["overhead_median_ms"] = round(report["gateway"]["median_ms"] - report["direct"]["median_ms"], 3)
    for key, engine in (("ratio_to_engine_write", "engine_write"),
                        ("ratio_to_engine_write_two_checkpoints", "engine_write_two_checkpoints")):
        engine_ms = report[engine]["median_ms"]
        report[key] = {surface: round(report[surface]["median_ms"] / engine_ms, 2) if engine_ms else None
                       for surface in ("gateway", "json_api")}
    report["throughput"] = [throughput_measure(clients=n, calls=calls, processes=p, root=root, new_run=_new_run)
                            for n in clients for p in sorted({1, min(processes, n)})]
    return report


def _json_calls(root: Path, calls: int) -> list[float]:
    """Seconds of each of ``calls`` calls through the JSON API (Django's request handling in
    this process, no socket) on a run of their own."""
    run_id, token = _new_run(root, "json-api")
    http = HttpClient(SERVER_NAME="127.0.0.1")
    took = []
    for i in range(calls):
        started = time.perf_counter()
        response = http.post(f"/api/v1/runs/{run_id}/calls", content_type="application/json",
                             data=json.dumps({"call_id": f"j{i}", "tool": "write_file",
                                              "arguments": {"path": f"notes/{i}.txt", "content": f"note {i}\n"}}),
                             HTTP_AUTHORIZATION=f"Bearer {token}")
        took.append(time.perf_counter() - started)
        if response.status_code != 200 or response.json().get("status") != "executed":
            raise BenchmarkError("a JSON API call did not execute", status=response.status_code)
    return took


def _engine_writes(root: Path, calls: int, *, name: str = "folded") -> list[float]:
    """Seconds of each write action of a scripted workspace run of ``calls`` writes driven by the
    engine in this process (one commit per write, its default, unless ``RATCHET_FOLD_INTENTS`` is
    off: then two checkpoints per write, as a gateway call has: DESIGN.md section 4.13), measured
    from one write's end to the next one's; the first, which also opens the session, left out."""
    task = workspace_task(directory=root / f"engine-writes-{name}", task_id=f"bench-gateway-engine-{name}",
                          writes=calls + 1)
    run_id = run_start(spec_path=task, worker="bench-gateway-engine")
    took: list[float] = []
    mark = [time.perf_counter(), 0]

    def on_step(step: StepReport) -> None:
        if step.cursor > mark[1]:
            now = time.perf_counter()
            took.append(now - float(mark[0]))
            mark[0], mark[1] = now, step.cursor

    if run_advance(run_id=run_id, worker="bench-gateway-engine", on_step=on_step).phase != Phase.COMPLETED:
        raise BenchmarkError("the engine's timed run did not complete", run_id=run_id)
    return took[1:] or took


def gateway_child_settings(*, calls: int, environ: dict[str, str]) -> dict[str, str]:
    """The ``RATCHET_*`` settings the measuring child gets: ``environ``'s ``RATCHET_GATEWAY_*``
    ones, with ``RATCHET_GATEWAY_RATE_LIMIT`` at least what one token spends here (``calls``
    timed calls plus the counted ones, and a margin), so the limit never refuses the bench."""
    passed = {k: v for k, v in environ.items() if k.startswith("RATCHET_GATEWAY_")}
    needed = calls + 4 * (UNITS + 1) + 100
    try:
        configured = int(passed.get("RATCHET_GATEWAY_RATE_LIMIT", "0"))
    except ValueError:
        configured = 0
    passed["RATCHET_GATEWAY_RATE_LIMIT"] = str(max(configured, needed))
    return passed


def gateway_bench_isolated(*, calls: int, clients: list[int], processes: int = 2) -> dict[str, Any]:
    """Run :func:`gateway_measure` in a child process against a throwaway database.

    Raises:
        BenchmarkScratchError: the scratch database cannot be made; BenchmarkError: the child failed.
    """
    db = settings.DATABASES["default"]
    engine = str(db.get("ENGINE", ""))
    scratch_dir = Path(tempfile.mkdtemp(prefix="bench-", dir=settings.VAR_DIR))
    pg_name: str | None = None
    try:
        if engine.endswith("sqlite3"):
            path = scratch_dir / "bench.sqlite3"
            url, marker = f"sqlite:///{path}", str(path)
        elif engine.endswith("postgresql"):
            pg_name = scratch_database_create(settings_dict=db)
            url, marker = scratch_postgres_url(db=db, name=pg_name), pg_name
        else:
            raise BenchmarkScratchError("only SQLite and PostgreSQL can be benchmarked", engine=engine)
        out = scratch_dir / "gateway.json"
        cmd = manage_argv("bench_gateway", "--child", str(out), "--calls", str(calls),
                          "--clients", ",".join(str(c) for c in clients), "--processes", str(processes))
        env = scratch_env(scratch_dir=scratch_dir, url=url, marker=marker,
                          extra=gateway_child_settings(calls=calls, environ=dict(os.environ)))
        code = subprocess.run(cmd, env=env, cwd=settings.BASE_DIR).returncode
        if code != 0 or not out.exists():
            raise BenchmarkError("the measuring child process failed", exit_code=code)
        report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        report["engine"] = "postgresql" if pg_name else "sqlite"
        return report
    finally:
        shutil.rmtree(scratch_dir, ignore_errors=True)
        if pg_name is not None:
            scratch_database_drop(settings_dict=db, name=pg_name)
