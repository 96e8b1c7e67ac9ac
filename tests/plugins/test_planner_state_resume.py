"""Story: a worker running a planner with memory is SIGKILLed between proposals and another resumes.

The planner's new state is committed in the same checkpoint as the intent, so the resumed
planner gets exactly the state of the last commit: the note-taker (which decides from its
counter alone, not from the cursor) goes on with the next note, and the store -- counted from
its own receipts -- holds every note once (DESIGN.md sections 5.3 and 5.10). Real processes, real
SIGKILL at named crash points.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from runtime.models import Run
from tests.engine.support import restore, trace_events
from tests.helpers.procs import KILLED, child_env, run_manage
from tests.plugins.support import notes_task, require_example_package, store

pytestmark = pytest.mark.django_db(transaction=True)

CASES = [
    # (crash point, what the last checkpoint holds when the worker dies)
    ("engine.after_intent_commit:2", {"written": 2}, "note-2"),
    ("engine.before_propose:2", {"written": 1}, None),
]


@pytest.mark.parametrize(("point", "committed", "pending"), CASES, ids=[c[0] for c in CASES])
def test_it_resumes_the_planner_with_exactly_the_committed_state(
    tmp_path: Path, point: str, committed: dict, pending: str | None
) -> None:
    require_example_package()
    task = notes_task(tmp_path, notes=3)

    killed = run_manage("run", str(task), "--no-progress",
                        env=child_env(RATCHET_CRASH_AT=point, RATCHET_LEASE_SECONDS="1"))
    assert killed.returncode == KILLED, killed.stderr
    run_id = Run.objects.get().run_id
    state = restore(run_id).state
    assert state.planner_state == committed
    assert (state.pending.action.target if state.pending else None) == pending
    assert list(store(tmp_path)["data"]) == ["note-1"]

    resumed = run_manage("resume", run_id, "--wait", "10", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr

    final = restore(run_id).state
    assert final.phase == "completed" and final.planner_state == {"written": 3}
    kv = store(tmp_path)
    assert kv["data"] == {f"note-{n}": f"note {n} of 3" for n in (1, 2, 3)}
    effects = Counter(r["idempotency_key"] for r in kv["receipts"])
    assert len(effects) == 3 and set(effects.values()) == {1}
    proposed = [e["action"]["target"] for e in trace_events(run_id, "intent.proposed")]
    assert proposed == ["note-1", "note-2", "note-3"]
