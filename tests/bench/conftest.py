"""One quick benchmark run shared by the bench stories (it takes seconds, not milliseconds).

An operator runs ``manage.py bench --quick`` in a child process against the test database, as
they would against their own. The stories check the report's shape and where it ran -- never
how fast anything was: machines are shared and noisy, so no number is compared to a threshold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runtime.bench.sizes import SECTIONS as SECTIONS_ALL
from tests.helpers.procs import ChildResult, child_env, run_manage

COMMITS = 2
"""Commits the smoke run replays: enough for a crash at the last write and a resume."""

SECTIONS = ",".join(s for s in SECTIONS_ALL if s != "scale")
"""Every section but ``scale``: that one makes a virtual environment of its DBOS peer with pip
(minutes, and a package registry) and starts two Celery workers per repetition; it is run as
``manage.py bench --only scale --quick`` by hand, not by the suite."""


@dataclass(frozen=True)
class BenchRun:
    """The operator's bench run: the child's result and the JSON report it wrote."""

    result: ChildResult
    report: dict[str, Any]
    markdown: str


@pytest.fixture(scope="session")
def quick_bench(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    directory = tmp_path_factory.mktemp("bench")
    out, markdown = directory / "report.json", directory / "report.md"
    result = run_manage("bench", "--quick", "--repeat", "1", "--commits", str(COMMITS),
                        "--only", SECTIONS, "--json", str(out), "--markdown", str(markdown), env=child_env(),
                        timeout=600)
    assert result.returncode == 0, f"bench failed:\n{result.stdout}\n{result.stderr}"
    return BenchRun(result=result, report=json.loads(Path(out).read_text(encoding="utf-8")),
                    markdown=markdown.read_text(encoding="utf-8"))
