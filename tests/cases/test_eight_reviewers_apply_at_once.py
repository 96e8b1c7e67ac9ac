"""Story: eight ``cases apply`` of one signed decision at the same moment (F9, DESIGN.md section 6.6).

Real processes, started together. The decision is applied once; every other process either
reports it already applied or ends with a typed refusal (a lease holder was changing the run),
never "cannot release the lease" or a traceback, and each refused process is in the run's trace
as ``review.refused``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.models import ReviewCase, TraceEvent
from tests.helpers.procs import MANAGE, ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES = 8


def test_f9_eight_cases_apply_at_once_apply_once_and_trace_every_refusal(conflict, tmp_path):
    path = tmp_path / "decision.json"
    path.write_text(conflict.sign("abort").model_dump_json())
    env = child_env()
    procs = [subprocess.Popen([sys.executable, str(MANAGE), "cases", "apply", str(path)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(PROCESSES)]
    results = [(p.wait(timeout=240), *p.communicate(timeout=30)) for p in procs]

    applied = [out for code, out, _ in results if code == 0 and "(already applied)" not in out]
    refused = [err for code, _, err in results if code != 0]
    assert len(applied) == 1, results
    assert all("cannot release" not in err and "Traceback" not in err for err in refused), refused
    assert ReviewCase.objects.get(case_id=conflict.case_id).status == "aborted"
    assert TraceEvent.objects.filter(run_id=conflict.run_id, event_type="review.aborted").count() == 1
    assert TraceEvent.objects.filter(run_id=conflict.run_id, event_type="review.refused").count() == len(refused)
