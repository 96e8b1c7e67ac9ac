"""Named crash points are inert until a test arms one in a child, which then SIGKILLs itself.

STYLE.md rule 8; DESIGN.md section 8 (kill the process before and after every persistence step).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from runtime.checkpoints import protocol  # noqa: F401  (registers the commit protocol's points)
from runtime.core.crashpoints import CRASH_POINTS, crash_point, register
from runtime.errors import CrashPointError
from tests.helpers.procs import KILLED, ROOT

CHILD = textwrap.dedent(
    """
    import sys
    from runtime.core.crashpoints import crash_point, register
    register("test.point", "a point only this child uses")
    crash_point("test.point")
    print("survived hit 1", flush=True)
    crash_point("test.point")
    print("survived hit 2", flush=True)
    django = any(m == "django" or m.startswith("django.") for m in sys.modules)
    print("django imported:", django, flush=True)
    """
)


def _child(armed: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    if armed is not None:
        env["RATCHET_CRASH_AT"] = armed
    return subprocess.run(
        [sys.executable, "-c", CHILD], env=env, cwd=ROOT, capture_output=True, text=True, timeout=30
    )


def test_the_commit_protocol_registers_its_crash_points():
    for name in (
        "checkpoint.after_append",
        "checkpoint.before_hwm_cas",
        "checkpoint.after_hwm_cas",
    ):
        assert CRASH_POINTS[name]


def test_a_typo_in_a_crash_point_name_raises_instead_of_never_firing():
    with pytest.raises(CrashPointError) as caught:
        crash_point("checkpoint.after_apend")
    assert "checkpoint.after_apend" in str(caught.value)


def test_a_name_cannot_be_registered_with_two_meanings():
    register("test.once", "first meaning")
    assert register("test.once", "first meaning") == "test.once"
    with pytest.raises(CrashPointError):
        register("test.once", "another meaning")
    with pytest.raises(CrashPointError):
        register("test:colon", "names cannot hold the hit separator")


def test_it_is_inert_when_unarmed_or_armed_elsewhere(monkeypatch):
    monkeypatch.delenv("RATCHET_CRASH_AT", raising=False)
    crash_point("checkpoint.after_append")
    monkeypatch.setenv("RATCHET_CRASH_AT", "checkpoint.before_hwm_cas")
    crash_point("checkpoint.after_append")
    monkeypatch.setenv("RATCHET_CRASH_AT", "checkpoint.after_append:x")
    with pytest.raises(CrashPointError):
        crash_point("checkpoint.after_append")


def test_an_unarmed_child_runs_through_without_importing_django():
    result = _child(None)

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "survived hit 1",
        "survived hit 2",
        "django imported: False",
    ]


@pytest.mark.parametrize(
    ("armed", "survived"), [("test.point", []), ("test.point:2", ["survived hit 1"])]
)
def test_an_armed_child_is_sigkilled_at_the_chosen_hit(armed, survived):
    result = _child(armed)

    assert result.returncode == KILLED
    assert result.stdout.splitlines() == survived
