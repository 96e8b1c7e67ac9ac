"""Peak resident memory of a child ``manage.py run`` replay, next to an idle ``manage.py check``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from django.conf import settings

from runtime.bench.children import child_env, manage_argv
from runtime.bench.report import MIB, BenchReport, rate_metric
from runtime.bench.sizes import BenchSizes
from runtime.errors import BenchmarkError

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
    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *cmd], env=child_env(),
                          cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=3600,
                          check=False)
    peaks = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("peak-rss ")]
    if proc.returncode != 0 or len(peaks) != 1:
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]
        raise BenchmarkError(f"{what} failed: {tail[0] if tail else ''}"[:500],
                             exit_code=proc.returncode)
    # ru_maxrss is KiB on Linux and bytes on macOS.
    return int(peaks[0]) / (MIB if sys.platform == "darwin" else 1024)


def memory_measure(*, report: BenchReport, sizes: BenchSizes, task: Path) -> None:
    """Measure the peak RSS (MiB) of a child ``manage.py run`` of ``task`` and of an idle
    ``manage.py check``; append both to ``report``.

    Raises:
        BenchmarkError: either child failed.
    """
    replay = _peak_rss_mib(manage_argv("run", str(task), "--no-progress"),
                           what="the replay child")
    idle = _peak_rss_mib(manage_argv("check"), what="the idle child")
    report.metrics += [
        rate_metric("replay_peak_rss_mib",
                    f"peak RSS: `manage.py run` of {sizes.recovery_commits} commits", "MiB", [replay]),
        rate_metric("idle_peak_rss_mib", "  idle `manage.py check`, for comparison", "MiB",
                    [idle]),
    ]
