"""Story: an operator runs ``manage.py bench --quick`` and gets every number the README promises.

Each metric is there with a positive median over the samples it says it took, latencies carry a
p95, the ratios are positive, and the machine (cores, Python, database engine and version) is
printed with the table. Structure only: no timing is compared to anything.
"""

from __future__ import annotations

import pytest
from django.db import connection

from runtime.benchmarks import BenchSizes
from runtime.errors import BenchmarkError
from tests.bench.conftest import COMMITS, BenchRun

LATENCIES = {
    "checkpoint_commit_ms", "checkpoint_seal_ms", "checkpoint_restore_ms", "recovery_ms",
    "recovery_restore_ms", "trace_verify_ms_per_1000_events",
}
RATES = {
    "replay_writes_per_second": "writes/s", "replay_ms_per_write": "ms",
    "git_ms_per_commit": "ms", "replay_peak_rss_mib": "MiB", "idle_peak_rss_mib": "MiB",
    "attachment_put_mib_per_s": "MiB/s", "attachment_get_mib_per_s": "MiB/s",
}


def test_it_reports_every_metric_with_a_positive_median(quick_bench: BenchRun) -> None:
    metrics = quick_bench.report["metrics"]
    assert set(metrics) == LATENCIES | set(RATES)
    for name, metric in metrics.items():
        assert metric["median"] > 0, name
        assert metric["samples"] >= 1, name
        assert metric["label"], name
    for name in LATENCIES:
        assert metrics[name]["unit"] == "ms"
        assert metrics[name]["p95"] >= metrics[name]["median"] > 0, name
    for name, unit in RATES.items():
        assert metrics[name]["unit"] == unit
        assert metrics[name]["p95"] is None, name


def test_it_takes_the_samples_its_sizes_promise(quick_bench: BenchRun) -> None:
    sizes = BenchSizes.choose(quick=True, repeat=1, commits=COMMITS)
    report = quick_bench.report
    assert report["sizes"] == {"commits": COMMITS, "repeat": 1, "samples": sizes.samples,
                               "executed_writes": 30, "trace_events": sizes.trace_events,
                               "attachments": sizes.attachments}
    metrics = report["metrics"]
    for name in ("checkpoint_commit_ms", "checkpoint_seal_ms", "checkpoint_restore_ms"):
        assert metrics[name]["samples"] == sizes.samples
    assert metrics["recovery_ms"]["samples"] == 1
    assert metrics["trace_verify_ms_per_1000_events"]["samples"] == 3


def test_it_reports_what_exactly_once_costs_as_ratios(quick_bench: BenchRun) -> None:
    ratios = quick_bench.report["ratios"]
    assert set(ratios) == {"seal_share_of_commit", "replay_vs_plain_git"}
    assert 0 < ratios["seal_share_of_commit"]["value"]
    assert ratios["replay_vs_plain_git"]["value"] > 0
    facts = quick_bench.report["facts"]
    assert facts["checkpoint_envelope_bytes"] > 0
    assert facts["trace_events_per_replay_run"] > 0


def test_it_prints_the_machine_with_a_table_of_medians(quick_bench: BenchRun) -> None:
    machine = quick_bench.report["machine"]
    assert machine["cores"] >= 1
    assert machine["python"]
    assert machine["database_vendor"] == connection.vendor
    engine = "SQLite" if connection.vendor == "sqlite" else "PostgreSQL"
    assert machine["database"].startswith(engine)
    out = quick_bench.result.stdout
    assert machine["database"] in out
    assert f"{machine['cores']} cores" in out
    for metric in quick_bench.report["metrics"].values():
        assert metric["label"] in out
    for ratio in quick_bench.report["ratios"].values():
        assert ratio["label"] in out


@pytest.mark.parametrize("size", ["repeat", "commits"])
def test_it_refuses_sizes_below_one(size: str) -> None:
    with pytest.raises(BenchmarkError):
        BenchSizes.choose(quick=True, **{size: 0})
