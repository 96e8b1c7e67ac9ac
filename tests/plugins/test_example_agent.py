"""Story: an agent developer installs their own package and runs its agent under Ratchet.

The example package (``tests/example_agent``, installed by ``tests/run``, never by a test) adds
a planner with memory, a key-value store adapter and a verifier through entry points; a task
spec runs them by name, or by dotted path, with no change to Ratchet (DESIGN.md section 5.10).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.engine.support import restore, trace_events
from tests.plugins.support import notes_task, require_example_package, store

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _installed() -> None:
    require_example_package()


def _finish(task: Path) -> str:
    run_id = run_start(spec_path=task, worker="agent-dev")
    report = run_advance(run_id=run_id, worker="agent-dev")
    assert (report.phase, report.stop_reason) == ("completed", "verified")
    return run_id


def test_it_runs_the_example_agent_by_name(tmp_path: Path) -> None:
    run_id = _finish(notes_task(tmp_path, notes=3))

    kv = store(tmp_path)
    assert kv["data"] == {f"note-{n}": f"note {n} of 3" for n in (1, 2, 3)}
    keys = [r["idempotency_key"] for r in kv["receipts"]]
    assert len(keys) == 3 and len(set(keys)) == 3  # one effect per key, from the store's own records
    assert restore(run_id).state.planner_state == {"written": 3}


def test_it_runs_the_example_agent_by_dotted_path(tmp_path: Path) -> None:
    task = notes_task(
        tmp_path, notes=2,
        planner='kind = "python"\nentry = "ratchet_example_agent.planner:NoteTaker"',
        adapter='adapter = "python"\nentry = "ratchet_example_agent.kvstore:KeyValueStore"',
        verifier='kind = "python"\nentry = "ratchet_example_agent.verifier:NotesPresent"\nnotes = 2',
    )
    run_id = _finish(task)

    assert sorted(store(tmp_path)["data"]) == ["note-1", "note-2"]
    pins = Run.objects.get(run_id=run_id).spec["plugins"]
    assert pins["adapter"]["name"] == "python"
    assert pins["adapter"]["entry"] == "ratchet_example_agent.kvstore:KeyValueStore"


def test_it_pins_which_package_provided_each_plugin(tmp_path: Path) -> None:
    run_id = _finish(notes_task(tmp_path, notes=1))

    pins = Run.objects.get(run_id=run_id).spec["plugins"]
    planner = dict(pins["planner"])
    assert planner.pop("code_digest").startswith("sha256:")
    assert planner.pop("closure_digest").startswith("sha256:")  # what the entry module imports
    assert planner == {"name": "note-taker", "entry": "ratchet_example_agent.planner:NoteTaker",
                       "distribution": "ratchet-example-agent", "version": "0.1.0"}
    assert pins["adapter"]["distribution"] == "ratchet-example-agent"
    assert trace_events(run_id, "run.started")[0]["plugins"] == pins
