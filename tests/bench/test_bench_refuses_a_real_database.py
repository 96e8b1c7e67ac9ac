"""Story: the measuring half of the bench refuses to run anywhere but its scratch database.

``manage.py bench`` re-executes itself with a hidden ``--scratch-child`` option against the
database it just made. A stranger (or a mistyped script) calling that option directly against a
real database gets a refusal before a single row is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection

from runtime.bench.scratch import scratch_database_name
from runtime.errors import BenchmarkScratchError
from runtime.models import Run
from tests.helpers.procs import child_env, run_manage


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("marker", [None, "some_other_database_bench", "the real database"])
def test_it_refuses_to_measure_the_real_database(tmp_path: Path, marker: str | None) -> None:
    if marker == "the real database":
        # Even told that the real database is its scratch, it refuses: it is not shaped like one.
        marker = str(connection.settings_dict["NAME"])
    out = tmp_path / "report.json"
    env = child_env(RATCHET_BENCH_SCRATCH=marker)
    result = run_manage("bench", "--quick", "--scratch-child", str(out), env=env, timeout=120)
    assert result.returncode != 0
    assert "refusing to benchmark outside a throwaway database" in result.stderr
    assert not out.exists()
    assert not Run.objects.exists()


def test_it_never_names_the_scratch_after_the_real_database() -> None:
    assert scratch_database_name(name="ratchet") == "ratchet_bench"
    assert len(scratch_database_name(name="r" * 70)) == 63
    with pytest.raises(BenchmarkScratchError):
        scratch_database_name(name="r" * 57 + "_bench")
