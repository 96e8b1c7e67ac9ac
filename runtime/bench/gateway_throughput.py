"""Gateway calls per second with many concurrent clients, in one process or several (DESIGN.md section 5.12).

Each client drives a run of its own with its own token (one run's calls are serialised by its
lease by design) and makes ``per_client`` calls back to back, after one untimed call that
restores the run (start-up, not throughput). With one process the clients are
threads of the measuring process, so Python's global interpreter lock caps the figure at about
one core. A deployment serves the gateway from several worker processes (the deploy guide's
``Procfile``), so ``processes > 1`` splits the clients over that many child processes
(``manage.py bench_gateway --clients-child``), each with its threads. Each child says it is
ready (a file beside its plan) once Django is loaded and its threads wait; the parent then
writes the start file, and every child starts on seeing it, so no child's start-up is timed;
the figure is all their calls over the time from the first start to the last end. Runs and
tokens go to the children in a file of mode 0600 in the scratch directory, never on a command
line or in the output.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections

from runtime.bench.children import manage_argv
from runtime.errors import BenchmarkError, GatewayRunBusyError
from runtime.gateway.calls import call_submit

READY_SECONDS = 300.0
"""How long the parent waits for every child to say it is ready (a loaded machine is slow to
start Django)."""


def clients_run(*, runs: list[tuple[str, str]], per_client: int, ready: Path | None = None,
                go: Path | None = None) -> dict[str, Any]:
    """Drive ``runs`` (``[(run_id, token)]``), one thread each, ``per_client`` calls per run.

    ``ready`` / ``go``: files of a multi-process measurement: this process writes ``ready`` once
    its threads wait and starts when ``go`` exists (None: start as soon as the threads are
    ready). Returns ``{"calls", "started", "ended", "errors"}`` (wall-clock seconds; errors are
    exception names, at most five).
    """
    errors: list[str] = []
    barrier = threading.Barrier(len(runs) + 1)

    def call(run_id: str, token: str, name: str) -> None:
        while True:
            try:
                call_submit(run_id=run_id, call_id=name, tool="write_file",
                            arguments={"path": f"notes/{name}.txt", "content": f"{name}\n"}, token=token)
                return
            except GatewayRunBusyError:
                time.sleep(0.01)

    def client(run_id: str, token: str) -> None:
        try:
            # One untimed call first: the run's restore and this process's first compile of
            # each statement are start-up, not throughput.
            warm = _failed(lambda: call(run_id, token, "warm-up"))
            barrier.wait()  # every thread gets here, so the start never waits for a dead one
            failed = warm or _failed(lambda: [call(run_id, token, f"t{i}") for i in range(per_client)])
            if failed:  # reported, not hidden: the figure is void with errors
                errors.append(failed)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=client, args=run) for run in runs]
    for t in threads:
        t.start()
    if ready is not None and go is not None:
        ready.write_text("ready", encoding="utf-8")
        while not go.exists():
            time.sleep(0.005)
    barrier.wait()
    started = time.time()
    for t in threads:
        t.join()
    return {"calls": len(runs) * per_client, "started": started, "ended": time.time(), "errors": errors[:5]}


def _failed(work: Callable[[], object]) -> str | None:
    try:
        work()
    except Exception as exc:  # the bench reports it: its figure is void then
        return type(exc).__name__
    return None


def throughput_measure(*, clients: int, calls: int, processes: int, root: Path,
                       new_run: Callable[[Path, str], tuple[str, str]]) -> dict[str, Any]:
    """Calls per second of ``clients`` concurrent clients sharing about ``calls`` calls, over
    ``processes`` processes (1: threads of this process).

    Returns ``{"clients", "processes", "calls", "seconds", "calls_per_second", "errors"}``.

    Raises:
        BenchmarkError: a child process failed.
    """
    processes = max(1, min(processes, clients))
    runs = [new_run(root, f"c{clients}-p{processes}-{k}") for k in range(clients)]
    per_client = max(1, calls // clients)
    if processes == 1:
        found = [clients_run(runs=runs, per_client=per_client)]
    else:
        connections.close_all()  # the children open their own; nothing of this process is shared
        go = root / f"clients-{clients}.go"
        children = []
        for p in range(processes):
            plan = root / f"clients-{clients}-{p}.json"
            fd = os.open(plan, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # tokens inside
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"runs": runs[p::processes], "per_client": per_client, "go": str(go)}, handle)
            out = root / f"clients-{clients}-{p}.out.json"
            children.append((subprocess.Popen(manage_argv("bench_gateway", "--clients-child", str(plan),
                                                          "--child", str(out)), cwd=settings.BASE_DIR), out, plan))
        _all_ready([plan.with_suffix(".ready") for _, _, plan in children], children=[c for c, _, _ in children])
        go.write_text("go", encoding="utf-8")
        found = []
        for child, out, _ in children:
            if child.wait() != 0 or not out.exists():
                raise BenchmarkError("a throughput child process failed", exit_code=child.returncode)
            found.append(json.loads(out.read_text(encoding="utf-8")))
    done = sum(f["calls"] for f in found)
    elapsed = max(f["ended"] for f in found) - min(f["started"] for f in found)
    return {"clients": clients, "processes": processes, "calls": done, "seconds": round(elapsed, 3),
            "calls_per_second": round(done / elapsed, 1),
            "errors": [e for f in found for e in f["errors"]][:5]}


def _all_ready(files: list[Path], *, children: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while not all(f.exists() for f in files):
        if any(c.poll() is not None for c in children) or time.monotonic() > deadline:
            for c in children:
                if c.poll() is None:
                    c.kill()
            raise BenchmarkError("a throughput child process did not get ready")
        time.sleep(0.02)


def clients_child(*, plan: Path, out: Path) -> None:
    """The body of ``bench_gateway --clients-child PLAN --child OUT``: run the plan's clients once
    the parent's start file appears and write what :func:`clients_run` returns to ``out``."""
    spec = json.loads(plan.read_text(encoding="utf-8"))
    found = clients_run(runs=[tuple(r) for r in spec["runs"]], per_client=int(spec["per_client"]),
                        ready=plan.with_suffix(".ready"), go=Path(spec["go"]))
    out.write_text(json.dumps(found), encoding="utf-8")
