"""Story: fencing tokens come from one counter per environment (DESIGN.md section 4.6).

A second run on a workspace an earlier run wrote to holds a newer token than anything that wrote
there, so the shipped scripted demo runs twice in a row on one workspace. A fencing refusal is
traced, counted and freezes the run with a review case instead of leaving it pending.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtime.adapters.fence import fence_read
from runtime.decisions.approvals import approval_grant
from runtime.engine import run_advance, run_start
from runtime.models import EnvironmentRegistration, MetricCounter, ReviewCase, Run
from runtime.ownership.leases import lease_acquire, lease_release
from tests.engine.support import restore, run_adapter, trace_events, workspace_journal

pytestmark = pytest.mark.django_db(transaction=True)

SHIPPED = Path(__file__).resolve().parents[2] / "runtime" / "task_specs" / "scripted_demo.toml"


def _shipped_spec_on(tmp_path: Path, workspace: Path) -> Path:
    """The shipped scripted demo, unchanged but for its target: ``workspace``."""
    text = SHIPPED.read_text(encoding="utf-8")
    text, count = re.subn(r'^target = "\.\./\.\./var/demo-workspace"$', f'target = "{workspace}"', text,
                          flags=re.MULTILINE)
    assert count == 1
    spec = tmp_path / "scripted_demo.toml"
    spec.write_text(text, encoding="utf-8")
    return spec


def _run_to_the_end(spec: Path) -> str:
    run_id = run_start(spec_path=spec)
    report = run_advance(run_id=run_id)
    assert report.phase == "awaiting_approval", report
    waiting = restore(run_id).state
    approval_grant(run_id=run_id, approver="olivia",
                   environment_fingerprint=waiting.pending.pre_state.state_fingerprint)
    report = run_advance(run_id=run_id)
    assert (report.phase, report.stop_reason) == ("completed", "verified"), report
    return run_id


def test_it_runs_the_shipped_scripted_spec_twice_on_one_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    spec = _shipped_spec_on(tmp_path, workspace)

    first = _run_to_the_end(spec)
    second = _run_to_the_end(spec)

    tokens = [r.fencing_token for r in run_adapter(second).receipts()]
    assert len(tokens) == 8 and tokens == sorted(tokens)
    assert max(tokens[:4]) < min(tokens[4:])  # the second run's writes hold newer tokens
    assert trace_events(first, "fence.refused") == [] and trace_events(second, "fence.refused") == []
    registered = EnvironmentRegistration.objects.get(instance_id=Run.objects.get(run_id=second).environment_instance_id)
    assert registered.fencing_token == Run.objects.get(run_id=second).lease_version


def test_two_runs_on_one_environment_never_share_a_token(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    spec = _shipped_spec_on(tmp_path, workspace)
    a, b = run_start(spec_path=spec), run_start(spec_path=spec)

    versions = []
    for run_id in (a, b, a, b):
        lease = lease_acquire(run_id=run_id, worker="w", ttl_seconds=30)
        versions.append(lease.lease_version)
        lease_release(lease=lease)

    assert versions == sorted(versions) and len(set(versions)) == 4


def test_a_fencing_refusal_is_traced_counted_and_freezes_the_run(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    spec = _shipped_spec_on(tmp_path, workspace)
    run_id = run_start(spec_path=spec)
    assert run_advance(run_id=run_id, max_steps=1).phase == "pending"
    # Something the control plane never issued a token to fenced the workspace far ahead (a
    # restored control-plane database, another installation): the run must not stay pending.
    (workspace / ".ratchet" / "fence").write_text("1000000\n", encoding="ascii")

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "adapter_refused")
    (refused,) = trace_events(run_id, "fence.refused")
    assert refused["newest_seen"] == 1000000 and refused["refusals"] == 1
    assert refused["fencing_token"] == Run.objects.get(run_id=run_id).lease_version
    assert sum(MetricCounter.objects.filter(name="fencing_rejections").values_list("value", flat=True)) == 1
    case = ReviewCase.objects.get(run_id=run_id)
    assert case.status == "open" and case.reason == "adapter_refused"
    assert "FencingTokenError" in restore(run_id).state.stop_detail
    assert [r for r in workspace_journal(workspace) if r["type"] == "committed"] == []
    assert fence_read(workspace / ".ratchet" / "fence", label="fence") == 1000000
    assert not (workspace / "README.md").exists()
