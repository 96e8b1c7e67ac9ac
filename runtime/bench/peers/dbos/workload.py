"""The DBOS peer of the ``scale`` bench: W workflows x S steps, each step one durable file write.

Runs only in its own virtual environment (``requirements.txt`` beside this file; the bench makes
it under ``VAR_DIR/bench/peers/dbos-venv``), never inside Ratchet's: it imports nothing from
Ratchet or Django, and DBOS is no dependency of the product. ``runtime.bench.scale`` runs it as
a child process::

    python workload.py drive --database-url URL --workflows 50 --steps 20 --processes 2 --dir DIR

``drive`` registers a queue (one workflow at a time per executor, like a Celery prefork process
that runs one task at a time), starts ``--processes`` executors (``worker`` mode, each a DBOS
application launched on the same system database), waits until every one said it is ready,
then starts the clock, enqueues the workflows through a ``DBOSClient`` and stops the clock when
the last one has succeeded. Each step writes one file the way Ratchet's workspace adapter does
(temp file, fsync, rename, fsync the directory). It prints one JSON line: the seconds, the
writes, the sizes and the DBOS version.

Every database and directory is the caller's: the system database is the scratch one the bench
made; nothing here leaves loopback.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

APP = "ratchet-bench-peer"
"""The DBOS application name of every executor (one application, several processes)."""

QUEUE = "ratchet_bench"
"""The queue the driver enqueues on and every executor listens to."""

VERSION = "bench"
"""Every executor's application version, so any of them may run any enqueued workflow."""

POLL_SECONDS = 0.05
"""How often an idle executor looks for work on the queue (DBOS's default is 1 s; a short
interval lets the peer's queue hand work over about as fast as a Celery broker pushes it)."""


def _durable_write(path: str, content: str) -> int:
    """Replace ``path`` with ``content`` as the workspace adapter does; return the bytes."""
    target = Path(path)
    data = content.encode("utf-8")
    tmp = target.with_name(f"{target.name}.tmp-{uuid.uuid4().hex}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, target)
    dir_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return len(data)


def _config(database_url: str, executor: str) -> dict[str, object]:
    return {"name": APP, "system_database_url": database_url, "application_version": VERSION,
            "executor_id": executor, "log_level": "WARNING"}


def worker(args: argparse.Namespace) -> int:
    """An executor: launch DBOS, listen to the queue until standard input closes."""
    from dbos import DBOS

    @DBOS.step(name="durable_write")
    def durable_write(path: str, content: str) -> int:
        return _durable_write(path, content)

    @DBOS.workflow(name="write_files")
    def write_files(directory: str, steps: int) -> int:
        written = 0
        for n in range(steps):
            written += durable_write(str(Path(directory) / f"f{n:03d}.txt"), f"step {n}\n")
        return written

    del write_files  # registered with DBOS by the decorator; enqueued by name
    DBOS(config=_config(args.database_url, f"bench-{args.executor}"))  # type: ignore[arg-type]
    DBOS.launch()  # the first executor creates and migrates the system database's tables
    DBOS.register_queue(QUEUE, worker_concurrency=1, polling_interval_sec=POLL_SECONDS,
                        on_conflict="always_update")
    print("ready", flush=True)
    sys.stdin.read()  # the driver closes our standard input when it is done
    DBOS.destroy(workflow_completion_timeout_sec=0)
    return 0


def drive(args: argparse.Namespace) -> int:
    """Start the executors, enqueue the workflows, time them to the last result; print JSON."""
    from importlib.metadata import version

    from dbos import DBOSClient

    root = Path(args.dir)
    executors: list[subprocess.Popen[str]] = []
    client = None
    try:
        # One after the other: the first one migrates the system database, the next find it.
        for n in range(args.processes):
            proc = subprocess.Popen([sys.executable, __file__, "worker", "--database-url",
                                     args.database_url, "--executor", str(n)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            executors.append(proc)
            line = proc.stdout.readline() if proc.stdout else ""
            if line.strip() != "ready":
                raise SystemExit(f"a DBOS executor did not start (exit {proc.poll()})")
        client = DBOSClient(system_database_url=args.database_url)
        directories = []
        for n in range(args.workflows):
            directory = root / f"w{n:04d}"
            directory.mkdir(parents=True)
            directories.append(str(directory))
        started = time.perf_counter()
        handles = [client.enqueue({"queue_name": QUEUE, "workflow_name": "write_files"},
                                  directory, args.steps) for directory in directories]
        written = sum(handle.get_result(polling_interval_sec=POLL_SECONDS) for handle in handles)
        seconds = time.perf_counter() - started
    finally:
        for proc in executors:  # our own children, by their pipes and pids
            if proc.stdin:
                proc.stdin.close()
        for proc in executors:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if client is not None:
            client.destroy()
    files = sum(1 for _ in root.glob("w*/f*.txt"))
    if files != args.workflows * args.steps or written <= 0:
        raise SystemExit(f"the peer wrote {files} files, not {args.workflows * args.steps}")
    print(json.dumps({"seconds": seconds, "writes": files, "workflows": args.workflows,
                      "steps": args.steps, "processes": args.processes,
                      "dbos": version("dbos")}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``drive`` or ``worker`` and run it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    driver = sub.add_parser("drive")
    driver.add_argument("--database-url", required=True)
    driver.add_argument("--workflows", type=int, default=50)
    driver.add_argument("--steps", type=int, default=20)
    driver.add_argument("--processes", type=int, default=2)
    driver.add_argument("--dir", required=True)
    executor = sub.add_parser("worker")
    executor.add_argument("--database-url", required=True)
    executor.add_argument("--executor", default="0")
    args = parser.parse_args(argv)
    return drive(args) if args.mode == "drive" else worker(args)


if __name__ == "__main__":
    raise SystemExit(main())
