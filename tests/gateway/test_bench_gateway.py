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
    assert report["direct"]["n"] == report["gateway"]["n"] == 3
    assert [t["clients"] for t in report["throughput"]] == [1, 2]
    assert all(not t["errors"] for t in report["throughput"])
    assert "overhead (median)" in result.stdout
    assert report["per_call"]["statements"] > 0 and report["per_call"]["transactions"] >= 3  # lease, intent, receipt
