"""``manage.py bench_gateway`` measures on a throwaway database and reports every figure."""

import json

import pytest

from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_reports_overhead_and_throughput(tmp_path, ratchet_keys):
    out = tmp_path / "gateway.json"
    result = run_manage("bench_gateway", "--calls", "3", "--clients", "1,2", "--json", str(out),
                        env=child_env(), timeout=240)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["direct"]["n"] == report["gateway"]["n"] == report["json_api"]["n"] == 3
    # the engine's own write of the same kind, timed beside the gateway's surfaces
    assert report["engine_write"]["n"] >= 1 and report["engine_write"]["median_ms"] > 0
    ratios = report["ratio_to_engine_write"]
    assert set(ratios) == {"gateway", "json_api"} and all(r > 0 for r in ratios.values())
    assert "over the engine's write (medians)" in result.stdout
    # The two-checkpoint engine write, which a call's shape matches (DESIGN.md section 4.13).
    assert report["engine_write_two_checkpoints"]["n"] >= 1
    assert set(report["ratio_to_engine_write_two_checkpoints"]) == {"gateway", "json_api"}
    # calls/s with the clients as threads of one process, and spread over two processes
    assert [(t["clients"], t["processes"]) for t in report["throughput"]] == [(1, 1), (2, 1), (2, 2)]
    assert all(t["calls"] >= 2 and t["calls_per_second"] > 0 for t in report["throughput"][1:])
    assert all(not t["errors"] for t in report["throughput"])
    assert "overhead (median)" in result.stdout
    per_call = report["per_call"]
    assert set(per_call) == {"direct", "call_submit", "json_api", "mcp", "engine_write"}
    # Counted on both databases: a call's intent and its receipt each commit on the main database
    # and move the mark on its own (DESIGN.md section 4.3; a call's proposal waits for the caller,
    # so it keeps two checkpoints, section 4.13); the engine's write with one commit per write
    # commits once on each; the adapter fsyncs its journal and file.
    for surface in ("call_submit", "json_api", "mcp", "engine_write"):
        assert per_call[surface]["durable_transactions"] >= (2 if surface == "engine_write" else 4), surface
        # A PostgreSQL advance sends its statements as one pipeline (DESIGN.md section 4.13), so
        # round trips can be fewer than statements; neither is ever zero.
        assert per_call[surface]["round_trips"] > 0 and per_call[surface]["statements"] > 0, surface
        assert per_call[surface]["fsyncs"] >= 1, surface
    assert per_call["direct"]["durable_transactions"] == 0 and per_call["direct"]["fsyncs"] >= 1
    assert "client fsyncs" in result.stdout


def test_it_runs_past_the_default_rate_limit(tmp_path, ratchet_keys):
    out = tmp_path / "gateway.json"
    # 121 calls on one token: the default limit (120 a minute) would refuse the last one.
    env = child_env(RATCHET_GATEWAY_RATE_LIMIT="120")
    result = run_manage("bench_gateway", "--calls", "121", "--clients", "1", "--json", str(out),
                        env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["gateway"]["n"] == 121
