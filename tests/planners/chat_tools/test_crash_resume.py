"""Story: SIGKILL around propose and commit, resume in a new process; the model is asked at most once
per committed step and every write happens once (DESIGN.md section 6.7).

A child ``manage.py run`` of a two-write chat-tools task SIGKILLs itself at a named crash point
(``RATCHET_CRASH_AT``, lease 3 s: a step includes a model call); a new child ``manage.py resume``
finishes the run. The fake
model server -- its own process, alive across both -- counts the requests of every conversation
step. Checkpoint commits of this run: 1 creation, 2 intent of write 0, 3 its receipt, 4 intent of
write 1, 5 its receipt, 6 completion.

* killed *after* the commit that carries a step's reply: that step was asked exactly once;
* killed *before* it (the reply stored but not committed): that one step was asked twice, as
  DESIGN.md section 6.7 says, and nothing was executed for the lost reply;
* always: one ``committed`` journal record per idempotency key, the files as scripted.
"""

from __future__ import annotations

import re

import pytest

from runtime.models import Run
from tests.engine.support import journal_effects, run_target, workspace_files
from tests.helpers.procs import KILLED, child_env, run_manage
from tests.planners.chat_tools.support import FILES, HAPPY_STEPS, write_chat_task

pytestmark = pytest.mark.django_db(transaction=True)

ONCE = {0: 1, 1: 1, 2: 1}
STEP_1_TWICE = {0: 1, 1: 2, 2: 1}
FINISH_TWICE = {0: 1, 1: 1, 2: 2}  # "finish" is committed with the run's end, after the verifier
CASES = [
    # point, nth hit, requests per step after the resume
    pytest.param("chat_tools.after_reply_recorded", 2, STEP_1_TWICE, id="reply-recorded-not-committed"),
    pytest.param("checkpoint.after_commit", 4, ONCE, id="intent-committed-caller-unaware"),
    pytest.param("engine.after_execute", 2, ONCE, id="write-landed-receipt-unsaved", marks=pytest.mark.slow),
    # Past the main transaction, the commit point (DESIGN.md section 4.3): the resume completes the
    # mark and continues from the committed intent.
    pytest.param("checkpoint.before_hwm_cas", 4, ONCE, id="intent-committed-mark-pending", marks=pytest.mark.slow),
    pytest.param("checkpoint.after_append", 4, STEP_1_TWICE, id="intent-appended-uncommitted",
                 marks=pytest.mark.slow),
    pytest.param("engine.before_propose", 2, ONCE, id="before-asking-step-1", marks=pytest.mark.slow),
    pytest.param("engine.after_intent_commit", 2, ONCE, id="after-intent-1", marks=pytest.mark.slow),
    pytest.param("engine.after_step_commit", 1, ONCE, id="after-step-0", marks=pytest.mark.slow),
    pytest.param("engine.before_verify", 1, FINISH_TWICE, id="before-verify", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("point", "nth", "asked"), CASES)
def test_it_asks_the_model_at_most_once_per_committed_step_after_a_kill(tmp_path, fake_model, point, nth, asked):
    server = fake_model(HAPPY_STEPS)
    task = write_chat_task(tmp_path, base_url=server.base_url)
    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=f"{point}:{nth}", RATCHET_LEASE_SECONDS="3"))
    assert killed.returncode == KILLED, (killed.returncode, killed.stdout, killed.stderr)
    run_id = re.search(r"run ([0-9a-f]{32})", killed.stdout + killed.stderr).group(1)

    resumed = run_manage("resume", run_id, "--wait", "20", "--no-progress")
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert Run.objects.get(run_id=run_id).phase == "completed"
    workspace = run_target(run_id)
    assert {path: text for path, (text, _) in workspace_files(workspace).items()} == FILES
    effects = journal_effects(workspace)
    assert len(effects) == 2 and set(effects.values()) == {1}, effects
    assert server.requests_per_step() == asked
