"""Second chances (DESIGN.md section 6.12): a run a worker could not drive for want of its plug-in
is resumed from the run page once the plug-in is back (refused, with the cause, while it is not);
a failed or cancelled run is run again as a new run with the same spec, the two linked both ways.
Only a user with ``restart_run`` may do either; the command line does the same."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

import review.views.runs
from review.scope import scope_set
from runtime.decisions.cancellation import run_request_cancel
from runtime.decisions.second_chances import run_infrastructure_stop
from runtime.engine import run_advance, run_start
from runtime.errors import PluginLoadError
from runtime.models import Run
from tests.factories import write_scripted_task
from tests.review.stories import events, messages, phase

pytestmark = pytest.mark.django_db(transaction=True)

LATE_MODULE = "second_chance_late_planner"


def _blocked_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A run whose planner module is gone from this process after it started: driving it traces
    ``run.blocked``. Returns the run id and the module's directory (put back on the path to fix)."""
    plugins = tmp_path / "late"
    plugins.mkdir()
    (plugins / f"{LATE_MODULE}.py").write_text(
        "from runtime.planners.scripted import ScriptedPlanner as LatePlanner\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n"}])
    text = spec.read_text().replace('kind = "scripted"', f'kind = "python"\nentry = "{LATE_MODULE}:LatePlanner"')
    spec.write_text(text)
    run_id = run_start(spec_path=spec, worker="w")
    sys.path.remove(str(plugins))
    monkeypatch.delitem(sys.modules, LATE_MODULE)
    with pytest.raises(PluginLoadError):
        run_advance(run_id=run_id, worker="w")
    return run_id, plugins


def _cancelled_run(tmp_path: Path) -> str:
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n"},
                                                {"target": "b.txt", "content": "B\n"}])
    run_id = run_start(spec_path=spec, worker="w")
    run_advance(run_id=run_id, worker="w", max_steps=1)
    run_request_cancel(run_id=run_id, requested_by="olivia")
    assert run_advance(run_id=run_id, worker="w").phase == "cancelled"
    return run_id


def test_an_operator_resumes_a_blocked_run_once_its_plugin_is_back(
        tmp_path: Path, ratchet_keys, client_for, enqueued, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id, plugins = _blocked_run(tmp_path, monkeypatch)
    operator = client_for("operator")
    page = operator.get(reverse("review:run", args=[run_id])).content.decode()
    assert "Stopped for an infrastructure reason" in page and "Resume run" in page

    refused = operator.post(reverse("review:run-resume", args=[run_id]), follow=True)
    assert any("the cause is still there" in m for m in messages(refused.content.decode()))
    assert enqueued == [] and not events(run_id, "run.resume_requested")

    monkeypatch.syspath_prepend(str(plugins))  # the plug-in is installed again
    done = operator.post(reverse("review:run-resume", args=[run_id]))

    assert done.status_code == 303 and enqueued == [run_id]
    [asked] = events(run_id, "run.resume_requested")
    assert asked["requested_by"] == "operator" and asked["cause"] == "run.blocked"
    assert run_infrastructure_stop(run_id=run_id) is None
    assert run_advance(run_id=run_id, worker="w2").phase == "completed"


def test_an_operator_runs_a_cancelled_run_again_and_the_runs_link(
        tmp_path: Path, ratchet_keys, client_for, enqueued) -> None:
    old = _cancelled_run(tmp_path)

    answer = client_for("operator").post(reverse("review:run-again", args=[old]))

    new = Run.objects.get(again_of=old)
    assert answer.status_code == 303 and answer["Location"] == reverse("review:run", args=[new.run_id])
    assert new.spec["task"] == Run.objects.get(run_id=old).spec["task"] and enqueued[-1] == new.run_id
    assert events(new.run_id, "run.again_started")[0] == {"again_of": old, "requested_by": "operator"}
    assert events(old, "run.run_again")[0] == {"new_run_id": new.run_id, "requested_by": "operator"}
    old_page = client_for("operator").get(reverse("review:run", args=[old])).content.decode()
    new_page = client_for("operator").get(reverse("review:run", args=[new.run_id])).content.decode()
    assert new.run_id in old_page and old in new_page
    assert run_advance(run_id=new.run_id, worker="w").phase == "completed"
    assert (tmp_path / "ws" / "b.txt").read_text() == "B\n"


@pytest.mark.parametrize("persona", ["reviewer", "stranger"])
def test_only_a_user_with_restart_run_gets_a_second_chance(
        tmp_path: Path, ratchet_keys, client_for, enqueued, persona: str) -> None:
    old = _cancelled_run(tmp_path)

    answer = client_for(persona).post(reverse("review:run-again", args=[old]))

    assert answer.status_code == 403 and not Run.objects.filter(again_of=old).exists() and enqueued == [old]


def test_a_run_that_is_not_stopped_or_ended_is_refused(tmp_path: Path, ratchet_keys, enqueued) -> None:
    spec = write_scripted_task(tmp_path, steps=[{"target": "a.txt", "content": "A\n"}])
    run_id = run_start(spec_path=spec, worker="w")

    with pytest.raises(CommandError, match="not failed or cancelled"):
        call_command("second_chance", "again", run_id, "--by", "olivia")
    with pytest.raises(CommandError, match="not stopped for an infrastructure reason"):
        call_command("second_chance", "resume", run_id, "--by", "olivia")
    assert phase(run_id) == "running" and enqueued == []


def test_the_command_line_runs_a_cancelled_run_again(tmp_path: Path, ratchet_keys, enqueued) -> None:
    old = _cancelled_run(tmp_path)
    out = io.StringIO()

    call_command("second_chance", "again", old, "--by", "olivia", stdout=out)

    assert Run.objects.get(run_id=out.getvalue().strip()).again_of == old


def test_the_run_page_reads_second_chances_only_for_the_page_and_its_status_card(
        tmp_path: Path, ratchet_keys, client_for, enqueued, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _cancelled_run(tmp_path)
    read: list[str] = []
    real = review.views.runs.second_chance_context
    monkeypatch.setattr(review.views.runs, "second_chance_context",
                        lambda *, run, user: read.append(run.run_id) or real(run=run, user=user))
    operator, url = client_for("operator"), reverse("review:run", args=[old])

    for target in ("checkpoints", "timeline"):
        fragment = operator.get(url, headers={"HX-Request": "true", "HX-Target": target})
        assert fragment.status_code == 200 and "Run again" not in fragment.content.decode()
    assert read == [], "a checkpoints or timeline fragment does not read second chances"
    status = operator.get(url, headers={"HX-Request": "true", "HX-Target": "run-status"}).content.decode()
    assert "Run again" in status and read == [old]
    assert "Run again" in operator.get(url).content.decode() and read == [old, old]


def test_a_second_chance_outside_the_users_scope_is_a_404(
        tmp_path: Path, ratchet_keys, client_for, enqueued, personas) -> None:
    old = _cancelled_run(tmp_path)
    scope_set(user=personas["operator"], tenant_ids=["another-tenant"])

    for name in ("review:run-again", "review:run-resume"):
        assert client_for("operator").post(reverse(name, args=[old])).status_code == 404
    assert not Run.objects.filter(again_of=old).exists() and enqueued == [old]
