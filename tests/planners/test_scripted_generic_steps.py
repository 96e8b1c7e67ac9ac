"""Story: a scripted task proposes any action its adapter declares, checked when the spec is loaded.

DESIGN.md section 5.10. ``[[planner.steps]] action = "http_request"`` with ``target`` and
``params`` is proposed verbatim; the task spec validates it against the HTTP adapter's declared
action schema when it is loaded, so a step the adapter could never execute is a task spec error
naming its TOML path, before any run exists or any request is made. File steps keep their
stored form; an adapter that declares no schemas refuses generic steps.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runtime.core.checkpoint import Action, Risk
from runtime.errors import TaskSpecError
from runtime.planners.scripted import ScriptedPlanner
from runtime.taskspec import ScriptedPlannerSpec, TaskSpec, load_task_spec
from tests.engine.http.support import ORDERS_PATH, order_steps, write_orders_task

SERVICE = SimpleNamespace(port=9)  # loading a spec never contacts the service


def _load(tmp_path: Path, steps: list[dict[str, Any]]) -> TaskSpec:
    return load_task_spec(write_orders_task(tmp_path, SERVICE, steps=steps))  # type: ignore[arg-type]


def _problems(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    with pytest.raises(TaskSpecError) as caught:
        _load(tmp_path, steps)
    return caught.value.message


def test_it_proposes_a_generic_step_verbatim(tmp_path: Path) -> None:
    steps = order_steps(2)
    steps[1]["risk"] = "high"
    spec = _load(tmp_path, steps)
    options = ScriptedPlannerSpec.model_validate(spec.planner.options_json())
    planner = ScriptedPlanner(options=options)

    proposals = [planner.propose(cursor=c, planner_state=planner.init_state(), observation=None,  # type: ignore[arg-type]
                                 put_blob=lambda data: pytest.fail("a generic step stores no blob"))
                 for c in range(2)]

    assert proposals == [Action(kind="http_request", target=ORDERS_PATH, params=s["params"],
                                risk=Risk.HIGH if i else Risk.LOW) for i, s in enumerate(steps)]
    assert TaskSpec.from_json(spec.model_dump(mode="json")) == spec  # the stored form round-trips
    stored = spec.model_dump(mode="json")["planner"]["steps"][0]
    assert stored == {"kind": "action", "action": "http_request", "target": ORDERS_PATH,
                      "params": steps[0]["params"], "risk": "low"}


def test_it_reports_a_step_that_fails_the_adapters_schema_by_its_toml_path(tmp_path: Path) -> None:
    steps = order_steps(3)
    steps[0]["params"]["method"] = "GET"
    steps[1]["params"]["headers"] = {"X-Debug": "1"}
    steps[2]["target"] = "orders"

    message = _problems(tmp_path, steps)

    assert "planner.steps[0].params.method: Input should be 'POST'" in message
    assert "planner.steps[1].params.headers: unknown field" in message
    assert "planner.steps[2].target: String should match pattern" in message


def test_it_refuses_a_file_step_the_adapter_does_not_declare(tmp_path: Path) -> None:
    message = _problems(tmp_path, [{"target": "notes.txt", "content": "hi\n"}])

    assert "planner.steps[0]: adapter 'http' has no 'write_file' action; it declares http_request" in message


def test_it_refuses_a_generic_step_for_an_adapter_without_schemas(tmp_path: Path) -> None:
    task = write_orders_task(tmp_path, SERVICE, count=1)  # type: ignore[arg-type]
    text = task.read_text()
    start = text.index("options = ")
    task.write_text(text.replace('adapter = "http"', 'adapter = "workspace"')
                    .replace(text[start:text.index("\n", start) + 1], ""))

    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(task)

    assert "planner.steps[0]: adapter 'workspace' declares no action schemas" in caught.value.message


def test_it_keeps_the_stored_form_of_file_steps() -> None:
    options = ScriptedPlannerSpec.model_validate({"steps": [{"target": "a.txt", "content": "x"},
                                                            {"target": "a.txt", "delete": True}]})

    dumped = options.model_dump(mode="json")["steps"]

    assert dumped == [{"kind": "write_file", "target": "a.txt", "content": "x", "delete": False,
                       "executable": False, "risk": "low"},
                      {"kind": "delete_file", "target": "a.txt", "content": None, "delete": True,
                       "executable": False, "risk": "low"}]
