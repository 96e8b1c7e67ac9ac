"""Story: the commit path's UPDATEs are compiled once and refilled, never misfilled (DESIGN.md
section 4.3).

``runtime.database.statements`` caches the SQL the query API writes and fills in new values; these
check that the refilled statement hits exactly the row the query API would, with other values,
and that a shape whose values the compiler does not pass as parameters is never cached.
"""

from __future__ import annotations

import pytest

from runtime.database.routers import hwm_alias
from runtime.database.statements import compiled_update
from runtime.models import HighWaterMark

pytestmark = pytest.mark.django_db


def _build(s):
    queryset = HighWaterMark.objects.filter(run_id=s["run_id"], generation=s["expected"])
    return queryset, {"generation": s["generation"], "checkpoint_digest": s["digest"]}


def _row(run_id: str) -> HighWaterMark:
    return HighWaterMark.objects.create(task_id="t", run_id=run_id, environment_instance_id="e")


def test_it_updates_the_row_the_query_api_names_with_each_calls_values():
    _row("run-a"), _row("run-b")
    shape = ("test_compiled_updates",)
    for run_id, digest in (("run-a", "d-a"), ("run-b", "d-b")):
        slots = {"run_id": run_id, "expected": 0, "generation": 1, "digest": digest}
        assert compiled_update(alias=hwm_alias(), shape=shape, build=_build, slots=slots) == 1
    stale = {"run_id": "run-a", "expected": 0, "generation": 2, "digest": "d-x"}

    assert compiled_update(alias=hwm_alias(), shape=shape, build=_build, slots=stale) == 0
    assert dict(HighWaterMark.objects.values_list("run_id", "checkpoint_digest")) == {
        "run-a": "d-a", "run-b": "d-b"}


def test_it_falls_back_to_the_query_api_for_a_value_it_cannot_probe():
    _row("run-c")
    slots = {"run_id": "run-c", "expected": 0, "generation": 1, "digest": "d-c", "flag": True}

    def build(s):
        queryset, values = _build(s)
        return queryset.filter(generation__gte=0 if s["flag"] else 1), values

    assert compiled_update(alias=hwm_alias(), shape=("test_fallback",), build=build,
                           slots=slots) == 1
    assert HighWaterMark.objects.get(run_id="run-c").checkpoint_digest == "d-c"
