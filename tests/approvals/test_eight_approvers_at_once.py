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
from django.core.management import CommandError, call_command

import runtime.management.commands.approvals as command
from review.views.errors import lease_held_message
from runtime.errors import LeaseHeldError
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


def test_the_command_words_a_held_lease_as_the_dashboard_does(monkeypatch):
    held = LeaseHeldError(run_id="run-x", holder="operator:olivia:4f2a")

    def busy(**kwargs):
        raise held

    monkeypatch.setattr(command, "approval_grant", busy)
    with pytest.raises(CommandError) as refused:
        call_command("approvals", "approve", "run-x", "--approver", "olivia", "--fingerprint", "sha256:" + "a" * 64)

    shared = lease_held_message(held, unchanged="nothing was approved").removesuffix(
        "Reload in a few seconds to see the current state.")
    assert str(refused.value) == shared + "Run the command again in a few seconds."
    assert "Lease holder operator:olivia:4f2a is changing this run right now" in shared
