"""The task-spec loader fed arbitrary text raises only ``TaskSpecError`` (DESIGN.md section 7).

Story: a task file is outside input. Whatever bytes it holds -- random text,
a valid spec with random characters spliced in, a valid spec with one value replaced by any
JSON value, arrays nested thousands deep -- the loader answers with one ``TaskSpecError``
(plug-in lookups raise its subclasses), never a traceback.
"""

from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.errors import TaskSpecError
from runtime.taskspec import load_task_spec, validate_task_spec
from tests.fuzz.profiles import JSON_VALUES, QUICK, THOROUGH, json_paths, json_replace
from tests.planners.gitrepo import FIXTURES

SCRIPTED = (FIXTURES / "scripted.toml").read_text(encoding="utf-8")
SCRIPTED_RAW = tomllib.loads(SCRIPTED)
_DIR = Path(tempfile.mkdtemp(prefix="ratchet-fuzz-spec-"))


def _load_typed(data: bytes) -> None:
    path = _DIR / "task.toml"
    path.write_bytes(data)
    try:
        load_task_spec(path)
    except TaskSpecError:
        pass


def check_splice(position: int, inserted: str) -> None:
    cut = position % (len(SCRIPTED) + 1)
    _load_typed((SCRIPTED[:cut] + inserted + SCRIPTED[cut:]).encode("utf-8", "surrogatepass"))


def check_replaced_value(data: st.DataObject) -> None:
    path = data.draw(st.sampled_from(json_paths(SCRIPTED_RAW)), label="path")
    mutated: Any = json_replace(SCRIPTED_RAW, path, data.draw(JSON_VALUES, label="value"))
    if not isinstance(mutated, dict):
        return  # a TOML document is always a table
    try:
        validate_task_spec(mutated, source="fuzzed task spec")
    except TaskSpecError:
        pass


@QUICK
@given(st.binary(max_size=300))
def test_it_raises_only_typed_errors_for_arbitrary_bytes(data: bytes) -> None:
    _load_typed(data)


@QUICK
@given(st.integers(min_value=0), st.text(min_size=1, max_size=20))
def test_it_raises_only_typed_errors_for_a_spec_with_text_spliced_in(position: int, inserted: str) -> None:
    check_splice(position, inserted)


@QUICK
@given(st.data())
def test_it_raises_only_typed_errors_for_a_spec_with_one_value_replaced(data) -> None:
    check_replaced_value(data)


@pytest.mark.parametrize("nested", ["[" * 900 + "]" * 900, "{a=" * 900 + "1" + "}" * 900,
                                    "[" * 30_000 + "]" * 30_000])
def test_it_raises_only_typed_errors_for_deep_nesting(nested: str) -> None:
    with pytest.raises(TaskSpecError, match="nests more than 64 levels deep"):
        path = _DIR / "deep.toml"
        path.write_text(SCRIPTED.replace('version = "1"', f'version = "1"\nx = {nested}', 1))
        load_task_spec(path)


@pytest.mark.slow
@THOROUGH
@given(st.binary(max_size=3000), st.integers(min_value=0), st.text(min_size=1, max_size=60))
def test_it_raises_only_typed_errors_for_arbitrary_input_thoroughly(data: bytes, position: int,
                                                                     inserted: str) -> None:
    _load_typed(data)
    check_splice(position, inserted)


@pytest.mark.slow
@THOROUGH
@given(st.data())
def test_it_raises_only_typed_errors_for_replaced_values_thoroughly(data) -> None:
    check_replaced_value(data)
