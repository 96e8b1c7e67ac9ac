"""The machine a bench ran on, as the report prints it."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from django.db import connection

from runtime.planners.git_history.source import git_env


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
