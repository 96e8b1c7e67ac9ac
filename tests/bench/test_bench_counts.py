"""The bench's counting and report logic: medians of counts, the tables, the scale ratio, the
gateway child's settings and the peer's scratch database. Counts and shapes, never timings."""

from __future__ import annotations

import pytest

from runtime.bench.counting import DatabaseCounts, count_of
from runtime.bench.gateway import gateway_child_settings
from runtime.bench.report import BenchReport, Count
from runtime.bench.scale import scale_paired_ratio, scale_ratio
from runtime.bench.scratch import scratch_peer_name, scratch_peer_url
from runtime.bench.sizes import SECTIONS, BenchSizes
from runtime.errors import BenchmarkError


def units(*fsyncs: int) -> list[DatabaseCounts]:
    return [DatabaseCounts(statements=5 + n, round_trips=9 + n, commits=2,
                           durable_transactions=2, fsyncs=n) for n in fsyncs]


def test_it_takes_the_median_of_each_count_and_the_fsyncs_only_when_asked() -> None:
    counted = count_of("w", "a write", units(4, 5, 4), fsyncs=True)
    assert (counted.statements, counted.round_trips, counted.durable_transactions,
            counted.fsyncs, counted.units) == (9, 13, 2, 4, 3)
    assert count_of("w", "a write", units(4, 5, 4)).fsyncs is None


def test_it_prints_client_fsyncs_and_a_dash_where_they_were_not_counted() -> None:
    report = BenchReport(machine={}, sizes={}, counts=[
        count_of("workspace", "workspace write", units(4), fsyncs=True),
        count_of("git", "git write", units(0)),
    ])
    rendered = report.render()
    assert "| client fsyncs | units |" in rendered
    assert "| workspace write | 9 | 13 | 2 | 4 | 1 |" in rendered
    assert "| git write | 5 | 9 | 2 | - | 1 |" in rendered


def test_it_keeps_the_fsyncs_through_json() -> None:
    report = BenchReport(machine={}, sizes={}, counts=[Count(
        name="w", label="w", statements=1, round_trips=2, durable_transactions=1, units=1,
        fsyncs=5)])
    again = BenchReport.from_dict(report.as_dict())
    assert again.counts == report.counts


def test_it_divides_ratchets_median_writes_by_the_peers() -> None:
    assert scale_ratio([10.0, 14.0, 12.0], [100.0, 80.0, 120.0]) == pytest.approx(0.12)
    with pytest.raises(BenchmarkError):
        scale_ratio([10.0], [])


def test_it_pairs_each_repetition_with_the_peers_run_beside_it() -> None:
    # A load that drifts: both slow in the first repetition, both fast in the last two.
    ratchet, peer = [5.0, 20.0, 22.0], [50.0, 100.0, 110.0]
    assert scale_paired_ratio(ratchet, peer) == pytest.approx(0.2)
    assert scale_ratio(ratchet, peer) == pytest.approx(0.2)
    assert scale_paired_ratio([5.0, 30.0, 31.0], [100.0, 50.0, 62.0]) == pytest.approx(0.5)
    with pytest.raises(BenchmarkError):
        scale_paired_ratio([1.0, 2.0], [1.0])


def test_it_gives_the_gateway_child_its_settings_and_a_rate_limit_that_fits() -> None:
    passed = gateway_child_settings(calls=500, environ={
        "RATCHET_GATEWAY_RATE_LIMIT": "120", "RATCHET_GATEWAY_REUSE_SESSIONS": "false",
        "RATCHET_HWM_DATABASE_URL": "sqlite:///elsewhere", "HOME": "/root"})
    assert passed["RATCHET_GATEWAY_REUSE_SESSIONS"] == "false"
    assert int(passed["RATCHET_GATEWAY_RATE_LIMIT"]) > 500
    assert set(passed) == {"RATCHET_GATEWAY_RATE_LIMIT", "RATCHET_GATEWAY_REUSE_SESSIONS"}
    larger = gateway_child_settings(calls=5, environ={"RATCHET_GATEWAY_RATE_LIMIT": "100000"})
    assert larger["RATCHET_GATEWAY_RATE_LIMIT"] == "100000"


def test_it_sizes_the_scale_section_and_runs_it_only_when_asked() -> None:
    assert "scale" in SECTIONS
    full, quick = BenchSizes.choose(quick=False), BenchSizes.choose(quick=True)
    assert (full.scale_runs, full.scale_writes, full.scale_repeat) == (50, 20, 5)
    assert quick.scale_runs * quick.scale_writes < full.scale_runs * full.scale_writes
    assert BenchSizes.choose(quick=True, scale_runs=3, sections=["scale"]).scale_runs == 3


def test_it_puts_the_peer_on_a_scratch_database_of_its_own() -> None:
    assert scratch_peer_name(name="ratchet_bench") == "ratchet_bench_dbos"
    assert len(scratch_peer_name(name="r" * 63)) <= 63
    url = scratch_peer_url(db={"NAME": "ratchet_bench", "USER": "postgres", "HOST": "127.0.0.1",
                               "PORT": 5432})
    assert url.startswith("postgresql://") and url.endswith("/ratchet_bench_dbos")
