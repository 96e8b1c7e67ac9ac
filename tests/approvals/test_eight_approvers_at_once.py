"""Story: eight operators run ``approvals approve`` on one waiting run at the same moment (F9).

Real processes, started together. Exactly one approval is granted and the write runs once; every
other process ends with a typed, plain-language refusal (the run is being changed by another
holder, or no approval is waiting any more) instead of a lease error, and each loser's refusal
is in the run's trace.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from runtime.models import TraceEvent
from tests.helpers.procs import MANAGE, ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)

PROCESSES = 8


def test_f9_it_grants_once_and_tells_every_loser_why(story):
    item = story.waiting()
    env = child_env()
    procs = [subprocess.Popen([sys.executable, str(MANAGE), "approvals", "approve", story.run_id,
                               "--approver", f"olivia{n}", "--fingerprint", item.environment_fingerprint],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for n in range(PROCESSES)]
    results = [(p.wait(timeout=240), *p.communicate(timeout=30)) for p in procs]

    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    assert len(winners) == 1, results
    assert all("cannot release" not in err and "Traceback" not in err for _, _, err in losers), losers
    assert all(("changing this run right now" in err) or ("no approval" in err.lower())
               or ("not waiting" in err.lower()) for _, _, err in losers), losers
    granted = TraceEvent.objects.filter(run_id=story.run_id, event_type="approval.granted").count()
    refused = TraceEvent.objects.filter(run_id=story.run_id, event_type="approval.refused").count()
    assert granted == 1
    assert refused == len(losers)
