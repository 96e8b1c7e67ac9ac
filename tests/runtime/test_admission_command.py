"""Story: an operator reads the admission gate from the command line, and a misspelt scope is
refused (DESIGN.md section 8.3).

``manage.py admission status`` with no arguments prints every known scope's state, open or
closed (it used to print only the closed ones, so an all-open install printed nothing and looked
broken); with a tenant, that tenant's scopes. ``admission reopen`` of a scope nothing ever named
exits 2 with ``AdmissionScopeUnknownError`` and records no decision.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runtime.evidence.trace import trace_append
from runtime.models import AdmissionDecision
from tests.helpers.procs import run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _status(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("admission", "status", *args, stdout=out)
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def test_status_without_arguments_prints_every_scope_open_or_closed(start_run) -> None:
    start_run(task_id="orders")
    closed, _ = start_run(task_id="refunds")
    trace_append(run_id=closed.identity.run_id, event_type="audit.effects",
                 payload={"keys": 1, "duplicates": 1, "missing": []})

    code, out = _status()
    lines = out.splitlines()

    assert code == 1, "a closed scope among them"
    assert [line.split(":")[0] for line in lines] == ["tenant-1/orders", "tenant-1/refunds"]
    assert lines[0].startswith("tenant-1/orders: open;")
    assert lines[1].startswith("tenant-1/refunds: CLOSED: duplicate_submissions 1 (threshold 0)")
    assert _status("tenant-1") == (code, out), "one tenant's scopes: here, all of them"
    nothing = "no scope has runs, metric counters, threshold overrides or decisions yet\n"
    assert _status("no-such-tenant") == (0, nothing)


def test_status_exits_0_when_every_scope_is_open(start_run) -> None:
    start_run(task_id="orders")

    code, out = _status()

    assert (code, out.splitlines()[0].split(";")[0]) == (0, "tenant-1/orders: open")


def test_reopen_of_a_scope_that_never_existed_exits_2_with_a_typed_error(start_run) -> None:
    start_run(task_id="orders")

    refused = run_manage("admission", "reopen", "tenant-1", "ordres", "--by", "ada", "--reason", "typo")

    assert refused.returncode == 2, refused.stderr
    assert "AdmissionScopeUnknownError: no such admission scope" in refused.stderr
    assert "task_id=ordres" in refused.stderr and "manage.py admission status" in refused.stderr
    assert not AdmissionDecision.objects.exists()
