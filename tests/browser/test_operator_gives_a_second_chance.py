"""Stories: an operator resumes from the run page a run a worker could not drive for want of its
plug-in -- refused while the plug-in is missing, accepted once it is back, and the worker then
completes the run -- and runs a cancelled run again as a new run that links back to it
(DESIGN.md section 6.12)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

from runtime.decisions.cancellation import run_request_cancel
from runtime.engine import run_advance, run_start
from runtime.errors import LeaseHeldError, PluginLoadError
from runtime.models import Run
from tests.browser.support import Story
from tests.factories import write_scripted_task
from tests.helpers.procs import ROOT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PLUGINS = ROOT / "tests" / "artifacts" / "browser_plugins"
"""A namespace-package folder the stack's processes import from (gitignored with the artifacts)."""

PLANNER = "from runtime.planners.scripted import ScriptedPlanner as LatePlanner\n"


@pytest.fixture
def blocked(tmp_path, stack, users):  # type: ignore[no-untyped-def]
    """A run whose planner module was removed after it started: driving it traced ``run.blocked``.
    Returns the run id and the module file (written again to install the plug-in)."""
    PLUGINS.mkdir(parents=True, exist_ok=True)
    name = f"late_{uuid.uuid4().hex[:12]}"
    module = PLUGINS / f"{name}.py"
    module.write_text(PLANNER, encoding="utf-8")
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n"}])
    spec.write_text(spec.read_text().replace(
        'kind = "scripted"', f'kind = "python"\nentry = "tests.artifacts.browser_plugins.{name}:LatePlanner"'))
    run_id = run_start(spec_path=spec)
    module.unlink()
    sys.modules.pop(f"tests.artifacts.browser_plugins.{name}", None)
    with pytest.raises(PluginLoadError):
        run_advance(run_id=run_id)
    yield run_id, module
    module.unlink(missing_ok=True)


def test_an_operator_resumes_a_blocked_run_once_its_plugin_is_back(browser, stack, blocked) -> None:
    run_id, module = blocked
    operator = Story(browser, stack.base_url, "resume-blocked")
    try:
        operator.sign_in("operator-ann")
        operator.open(f"/runs/{run_id}/", "blocked")
        assert "Stopped for an infrastructure reason" in operator.page.inner_text("#run-status")
        operator.page.click("button:has-text('Resume run')")
        operator.page.wait_for_url(f"{stack.base_url}/runs/{run_id}/")
        operator.shot("refused")
        assert any("the cause is still there" in m for m in operator.messages())

        module.write_text(PLANNER, encoding="utf-8")  # the plug-in is installed again
        operator.page.click("button:has-text('Resume run')")
        operator.page.wait_for_url(f"{stack.base_url}/runs/{run_id}/")
        operator.shot("resumed")
        assert any("Resume requested" in m for m in operator.messages())
        assert operator.wait_for_phase(run_id, {"completed"}) == "completed"
    finally:
        operator.close()


@pytest.fixture
def cancelled(tmp_path, stack, users) -> tuple[str, Path]:  # type: ignore[no-untyped-def]
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n"},
                                                {"target": "b.txt", "content": "B\n"}])
    run_id = run_start(spec_path=spec)
    run_request_cancel(run_id=run_id, requested_by="operator-ann")
    deadline = time.monotonic() + 60
    while Run.objects.get(run_id=run_id).phase != "cancelled":  # this process or the stack's worker
        try:
            run_advance(run_id=run_id)
        except LeaseHeldError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} was not cancelled")
        time.sleep(0.2)
    return run_id, tmp_path / "ws"


def test_an_operator_runs_a_cancelled_run_again(browser, stack, cancelled) -> None:
    old, workspace = cancelled
    operator = Story(browser, stack.base_url, "run-again")
    try:
        operator.sign_in("operator-ann")
        operator.open(f"/runs/{old}/", "cancelled")
        operator.page.click("button:has-text('Run again')")
        operator.page.wait_for_url(lambda url: f"/runs/{old}/" not in url)
        new = operator.page.url.rstrip("/").rsplit("/", 1)[-1]
        operator.shot("new-run")
        assert old in operator.page.inner_text("#run-status")  # "Started again from"
        assert operator.dialogs and "same spec" in operator.dialogs[0]
        assert operator.wait_for_phase(new, {"completed"}) == "completed"
        operator.open(f"/runs/{old}/", "old-run-links")
        assert new in operator.page.inner_text("#run-status")  # "Run again as"
    finally:
        operator.close()
    assert (workspace / "b.txt").read_text() == "B\n"
