"""Story: an agent developer names plug-ins in a task spec and gets every mistake named.

Unknown names, code that cannot be imported and objects that are not plug-ins each get a typed
error; every bad option is reported by its TOML path, as for Ratchet's own fields (DESIGN.md
section 5.10).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.errors import PluginLoadError, PluginNotFoundError, TaskSpecError
from runtime.plugins.registry import ADAPTERS, PLANNERS, VERIFIERS, plugin_load, plugin_names
from runtime.taskspec import load_task_spec
from tests.plugins.support import notes_task, require_example_package


def test_it_registers_the_built_ins_as_entry_points_of_ratchet() -> None:
    for group, name in ((PLANNERS, "scripted"), (PLANNERS, "git-history"), (ADAPTERS, "workspace"),
                        (ADAPTERS, "git"), (VERIFIERS, "files-equal"), (VERIFIERS, "always"),
                        (VERIFIERS, "tree-equals-source")):
        identity = plugin_load(group=group, name=name).identity
        assert name in plugin_names(group)
        assert identity.distribution == "ratchet" and identity.version


def test_it_names_an_unknown_plugin(tmp_path: Path) -> None:
    with pytest.raises(PluginNotFoundError) as caught:
        load_task_spec(notes_task(tmp_path, planner='kind = "note-takr"'))

    message = str(caught.value)
    assert "planner.kind: no ratchet.planners plug-in named 'note-takr'; installed: " in message
    assert "scripted" in message and isinstance(caught.value, TaskSpecError)


def test_it_reports_an_entry_point_that_fails_to_import(tmp_path: Path) -> None:
    task = notes_task(tmp_path, planner='kind = "python"\nentry = "tests.plugins.no_such_module:Planner"')

    with pytest.raises(PluginLoadError, match=r"planner.entry: .*cannot be imported.*ModuleNotFoundError"):
        load_task_spec(task)


def test_it_refuses_an_object_that_is_not_a_plugin(tmp_path: Path) -> None:
    task = notes_task(tmp_path, planner='kind = "python"\nentry = "tests.plugins.fakes:NotAPlugin"')

    with pytest.raises(PluginLoadError, match="needs an Options attribute that is a pydantic model"):
        load_task_spec(task)


def test_it_needs_an_entry_exactly_with_kind_python(tmp_path: Path) -> None:
    with pytest.raises(TaskSpecError, match='planner: entry = "module:Attr" is given exactly when kind = "python"'):
        load_task_spec(notes_task(tmp_path, planner='kind = "scripted"\nentry = "a.b:C"'))


def test_it_reports_each_bad_plugin_option_by_its_toml_path(tmp_path: Path) -> None:
    require_example_package()
    task = notes_task(tmp_path, planner_options='notes = "three"\ncolour = "red"', adapter_options="shards = 2",
                      verifier='kind = "notes-present"\nnotes = 0')

    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(task)

    message = str(caught.value)
    for expected in ("planner.notes: Input should be a valid integer",
                     "planner.colour: unknown field",
                     "environment.options.shards: unknown field",
                     "verifier.notes: Input should be greater than or equal to 1"):
        assert expected in message
    assert type(caught.value) is TaskSpecError


def test_it_refuses_an_unknown_option_even_where_the_plugin_model_would_ignore_it(tmp_path: Path) -> None:
    lenient = 'kind = "python"\nentry = "tests.plugins.fakes:LenientOptions"'
    task = notes_task(tmp_path, planner=lenient, planner_options="notes = 2\nnots = 3", verifier='kind = "always"')

    with pytest.raises(TaskSpecError) as caught:
        load_task_spec(task)

    assert "planner.nots: unknown field" in str(caught.value)


def test_it_hands_a_lenient_plugin_an_instance_of_its_own_options_model() -> None:
    from tests.plugins.fakes import LenientOptions

    loaded = plugin_load(group=PLANNERS, name="python", entry="tests.plugins.fakes:LenientOptions")
    options = loaded.options({"notes": 2})

    assert isinstance(options, LenientOptions.Options) and options.notes == 2


def test_it_stores_the_options_as_the_plugin_model_dumped_them(tmp_path: Path) -> None:
    require_example_package()
    spec = load_task_spec(notes_task(tmp_path, notes=2))

    assert spec.model_dump(mode="json")["planner"] == {"kind": "note-taker", "notes": 2, "prefix": "note"}
    assert "entry" not in spec.model_dump(mode="json")["environment"]


def test_it_loads_the_example_task_the_readme_runs() -> None:
    require_example_package()
    spec = load_task_spec(Path(__file__).parents[1] / "example_agent" / "notes.toml")

    assert (spec.planner.kind, spec.environment.adapter, spec.verifier.kind) == (
        "note-taker", "kv-store", "notes-present")
