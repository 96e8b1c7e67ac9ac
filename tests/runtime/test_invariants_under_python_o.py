"""Invariant checks are explicit, typed errors: they still hold under ``python -O``.

DESIGN.md section 7 names "``assert`` guarding runtime invariants (gone under ``python -O``)" as a
failure. A child interpreter started with ``-O`` (where every ``assert`` is stripped) commits an
invalid state, an unserialisable one and a checkpoint under a lost lease; each must be refused
with its typed error and the HWM must not move.
"""

from __future__ import annotations

import ast
import uuid

import pytest

from tests.helpers.procs import ROOT, run_worker


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("optimize", [True, False], ids=["python-O", "python"])
def test_invalid_states_and_lost_leases_are_refused_with_and_without_asserts(optimize):
    result = run_worker("under-o", "--run-id", uuid.uuid4().hex, optimize=optimize)

    assert result.returncode == 0, result.stderr
    outcomes = [
        (e["outcome"], e.get("error", e.get("generation", e.get("debug")))) for e in result.events
    ]
    assert outcomes == [
        ("debug", not optimize),
        ("invalid-state", "CheckpointInvariantError"),
        ("unserialisable", "CanonicalizationError"),
        ("hwm", 1),
        ("lost-lease", "LeaseLostError"),
        ("hwm", 1),
    ]


def test_no_production_module_guards_anything_with_assert():
    offenders = []
    for package in ("runtime", "review"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            offenders += [
                f"{path.relative_to(ROOT)}:{n.lineno}"
                for n in ast.walk(tree)
                if isinstance(n, ast.Assert)
            ]
    assert offenders == []
