"""Story: someone edits the spec stored with a run after it was created (N16).

Before, ``checkpoint verify`` took the scenario fingerprint from the run row and passed a run
whose stored spec no longer gave it. Now it recomputes the fingerprint from the stored spec and
the stored initial observation, as a restore does, and refuses when they disagree.
"""

from __future__ import annotations

import pytest

from runtime.checkpoints.protocol import checkpoint_verify
from runtime.engine import run_advance, run_start
from runtime.errors import ScenarioMismatchError
from runtime.models import Run
from tests.cases.conftest import STEPS
from tests.factories import write_scripted_task
from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


def _edit_stored_spec(run_id: str) -> None:
    run = Run.objects.get(run_id=run_id)
    spec = run.spec
    spec["task"]["policy"]["allowed_paths"] = [*spec["task"]["policy"]["allowed_paths"], "etc/**"]
    Run.objects.filter(run_id=run_id).update(spec=spec)


def test_n16_verify_refuses_a_stored_spec_that_no_longer_gives_the_runs_scenario(tmp_path, ratchet_keys) -> None:
    run_id = run_start(spec_path=write_scripted_task(tmp_path, steps=STEPS))
    run_advance(run_id=run_id, max_steps=2)
    assert checkpoint_verify(run_id=run_id).generation >= 2

    _edit_stored_spec(run_id)

    with pytest.raises(ScenarioMismatchError, match="stored spec"):
        checkpoint_verify(run_id=run_id)
    done = run_manage("checkpoint", "verify", run_id, env=child_env())
    assert done.returncode != 0 and "Traceback" not in done.stderr
