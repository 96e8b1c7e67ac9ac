"""Story: an operator runs ``manage.py bench --quick`` and gets every number the README promises.

Each metric is there with a positive median over the samples it says it took, latencies carry a
p95, the ratios are positive, and the machine (cores, Python, database engine and version) is
printed with the table. Structure only: no timing is compared to anything.
"""

from __future__ import annotations

from dataclasses import asdict

import pytest
from django.db import connection

from runtime.bench.sizes import BenchSizes
from runtime.errors import BenchmarkError
from tests.bench.conftest import COMMITS, SECTIONS, BenchRun

LEVELS = (0, 30)
LATENCIES = {
    "floor_insert_commit_ms", "floor_two_store_ms", "recovery_ms", "recovery_restore_ms",
    "trace_verify_ms_per_1000_events",
    *(f"checkpoint_{what}_ms_at_{n}" for what in ("commit", "seal", "restore") for n in LEVELS),
}
RATES = {
    "replay_writes_per_second": "writes/s", "replay_ms_per_write": "ms",
    "git_ms_per_commit": "ms", "replay_peak_rss_mib": "MiB", "idle_peak_rss_mib": "MiB",
    "attachment_put_mib_per_s": "MiB/s", "attachment_get_mib_per_s": "MiB/s",
    "orphans_worker_ready_s": "s", "orphans_first_released_s": "s", "orphans_all_released_s": "s",
    "orphans_all_completed_s": "s", "orphans_celery_ms_per_run": "ms",
    "orphans_resume_all_s": "s", "orphans_resume_all_ms_per_run": "ms",
    "long_run_rss_first_mib": "MiB", "long_run_rss_last_mib": "MiB",
    "long_run_rss_growth_pct": "%", "long_run_ms_per_step": "ms",
    "long_run_ms_per_step_first": "ms", "long_run_ms_per_step_last": "ms",
}
SIGNED = {"long_run_rss_growth_pct"}
"""Metrics that may be zero or negative (memory can shrink)."""

COUNTS = {"per_engine_step", "per_write_action", "per_workspace_write_action",
          "per_workspace_engine_step", "per_workspace_write_action_folded",
          *(f"per_checkpoint_{what}_at_{n}" for what in ("advance", "restore") for n in LEVELS)}


def test_it_reports_every_metric_with_a_positive_median(quick_bench: BenchRun) -> None:
    metrics = quick_bench.report["metrics"]
    # The pages section (runtime.bench.pages) names one latency per page it serves.
    pages = {name for name in metrics if name.startswith("page_")} | {"recovery_stats_scan_ms"}
    assert set(metrics) - pages == LATENCIES | set(RATES)
    for name, metric in metrics.items():
        assert name in SIGNED or metric["median"] > 0, name
        assert metric["samples"] >= 1, name
        assert metric["label"], name
    for name in LATENCIES:
        assert metrics[name]["unit"] == "ms"
        assert metrics[name]["p95"] >= metrics[name]["median"] > 0, name
    for name, unit in RATES.items():
        assert metrics[name]["unit"] == unit
        assert metrics[name]["p95"] is None, name


def test_it_divides_checkpoint_latencies_by_the_floor_of_the_same_run(quick_bench: BenchRun) -> None:
    metrics = quick_bench.report["metrics"]
    floor = metrics["floor_insert_commit_ms"]["median"]
    for n in LEVELS:
        commit = metrics[f"checkpoint_commit_ms_at_{n}"]
        assert commit["vs_floor"] == pytest.approx(commit["median"] / floor)
    assert metrics["floor_insert_commit_ms"]["vs_floor"] is None


def test_it_counts_statements_round_trips_and_durable_transactions(quick_bench: BenchRun) -> None:
    counts = quick_bench.report["counts"]
    assert set(counts) == COUNTS
    for name, count in counts.items():
        assert count["units"] >= 1, name
        # A PostgreSQL advance sends its statements as one pipeline (DESIGN.md section 4.13).
        assert count["round_trips"] >= 1 and count["statements"] >= 1, name
    for n in LEVELS:
        assert counts[f"per_checkpoint_advance_at_{n}"]["durable_transactions"] >= 1
        assert counts[f"per_checkpoint_restore_at_{n}"]["durable_transactions"] == 0
    assert (counts["per_write_action"]["durable_transactions"]
            >= counts["per_engine_step"]["durable_transactions"] >= 1)
    # The workspace adapter writes in the measuring process: its fsyncs are counted (journal
    # records, the file, its directory); git's happen in its children and are not.
    assert counts["per_workspace_write_action"]["fsyncs"] >= 1
    assert counts["per_write_action"]["fsyncs"] is None
    # One commit per write (RATCHET_FOLD_INTENTS, DESIGN.md section 4.13) never costs more.
    assert (counts["per_workspace_write_action_folded"]["durable_transactions"]
            <= counts["per_workspace_write_action"]["durable_transactions"])


def test_it_takes_the_samples_its_sizes_promise(quick_bench: BenchRun) -> None:
    sizes = BenchSizes.choose(quick=True, repeat=1, commits=COMMITS, sections=SECTIONS.split(","))
    report = quick_bench.report
    assert report["sizes"] == asdict(sizes)
    metrics = report["metrics"]
    for n in LEVELS:
        for what in ("commit", "seal", "restore"):
            assert metrics[f"checkpoint_{what}_ms_at_{n}"]["samples"] == sizes.samples_at(n)
    assert metrics["floor_insert_commit_ms"]["samples"] == sizes.samples
    assert metrics["recovery_ms"]["samples"] == 1
    assert metrics["trace_verify_ms_per_1000_events"]["samples"] == 3
    assert report["facts"]["orphans"] == sizes.orphans
    assert report["facts"]["long_run_steps"] == sizes.long_run_steps


def test_it_reports_what_exactly_once_costs_as_ratios(quick_bench: BenchRun) -> None:
    ratios = quick_bench.report["ratios"]
    assert set(ratios) == {"seal_share_of_commit_at_0", "seal_share_of_commit_at_30",
                           "checkpoint_commit_growth", "checkpoint_restore_growth",
                           "replay_vs_plain_git",
                           *(f"checkpoint_advance_vs_{floor}_at_{n}" for n in LEVELS
                             for floor in ("floor", "two_store_floor"))}
    assert all(ratio["value"] > 0 for ratio in ratios.values())
    facts = quick_bench.report["facts"]
    assert facts["checkpoint_envelope_bytes_at_0"] > 0
    assert facts["trace_events_per_replay_run"] > 0


def test_it_judges_every_target_of_the_issue(quick_bench: BenchRun) -> None:
    targets = quick_bench.report["targets"]
    assert set(targets) == {"commit_vs_floor_at_0", "commit_vs_floor_at_30",
                            "checkpoint_commit_flat", "checkpoint_restore_flat",
                            "durable_per_advance", "durable_per_write", "replay_vs_git",
                            "orphans_completed", "worker_memory_growth"}
    for target in targets.values():
        assert isinstance(target["met"], bool) and target["goal"]
        assert target["label"] in quick_bench.result.stdout


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
    assert out.startswith("# Ratchet benchmarks") and "| metric | median | p95 |" in out
    assert quick_bench.markdown == out.rstrip("\n") + "\n"


@pytest.mark.parametrize("size", ["repeat", "commits", "scale_runs", "scale_writes", "scale_repeat"])
def test_it_refuses_sizes_below_one(size: str) -> None:
    with pytest.raises(BenchmarkError):
        BenchSizes.choose(quick=True, **{size: 0})


def test_it_refuses_a_section_it_does_not_have() -> None:
    with pytest.raises(BenchmarkError, match="unknown bench section"):
        BenchSizes.choose(quick=True, sections=["checkpoints", "warp-drive"])
