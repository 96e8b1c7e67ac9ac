"""The case page shows both sides of every case kind, and stays readable -- its binding shown as
the verified checkpoint records it -- when the web process cannot load the run's plug-in
(DESIGN.md section 6.11)."""

from __future__ import annotations

import html
import io
import json
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from runtime.decisions.case_sides import case_sides
from runtime.decisions.reviews import decision_binding_recorded
from runtime.engine import run_advance, run_start
from runtime.models import ReviewCase
from tests.cases.kinds import KINDS, NEEDS_EXAMPLE_AGENT, PLANNED, ROGUE
from tests.plugins.support import notes_task, require_example_package

pytestmark = pytest.mark.django_db(transaction=True)

LATE_MODULE = "cases_late_planner"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_case_page_shows_both_sides(tmp_path: Path, ratchet_keys, client_for, kind: str) -> None:
    if kind in NEEDS_EXAMPLE_AGENT:
        require_example_package()
    case = KINDS[kind](tmp_path)
    sides = case_sides(case=case)

    page = client_for("reviewer").get(reverse("review:case", args=[case.case_id]))

    text = html.unescape(page.content.decode())
    assert page.status_code == 200
    assert f'data-case-kind="{kind}"' in text
    for side in sides.both:
        assert side.title in text
        for label, value in side.facts:
            assert value in text, (label, value)
    assert "Planned parameters (pending intent)" not in text or case.receipt
    assert "(none)" not in text and "(unknown)" not in text
    if kind == "receipt_conflict":
        assert f"  | {PLANNED.strip()}" in text and f"  | {ROGUE.strip()}" in text
    if kind == "receipt_drift":
        assert '"receipt_id": "edited-in-the-database"' in text  # the cached side, beside the adapter's
    if kind == "ledger_corrupt":  # nothing can be bound to a checkpoint that does not verify, and it says so
        assert "ledger entry 1 was altered" in text and "Sign and apply" not in text
    if kind in ("restore_refused", "code_changed"):  # a case only the rows hold: readable, never signable here
        assert case.observed["error"] in text and "Sign and apply" not in text


def _late_planner_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ReviewCase:
    """A planner_failed case of a run whose planner lives in a module only importable while the
    run was driven (the stand-in for a plug-in this web process does not have)."""
    require_example_package()
    plugins = tmp_path / "late"
    plugins.mkdir()
    (plugins / f"{LATE_MODULE}.py").write_text(
        "from tests.plugins.fakes import RaisesWhileProposing as LatePlanner\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    spec = notes_task(tmp_path, planner=f'kind = "python"\nentry = "{LATE_MODULE}:LatePlanner"',
                      planner_options="notes = 3", verifier='kind = "always"')
    run_id = run_start(spec_path=spec, worker="w")
    assert run_advance(run_id=run_id, worker="w").stop_reason == "planner_failed"
    sys.path.remove(str(plugins))
    monkeypatch.delitem(sys.modules, LATE_MODULE)
    return ReviewCase.objects.get(run_id=run_id)


def test_a_case_stays_readable_without_its_plugin(tmp_path: Path, ratchet_keys, client_for,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    case = _late_planner_case(tmp_path, monkeypatch)

    page = client_for("reviewer").get(reverse("review:case", args=[case.case_id]))
    out = io.StringIO()
    call_command("cases", "show", case.case_id, "--json", stdout=out)

    text = html.unescape(page.content.decode())
    recorded = decision_binding_recorded(case_id=case.case_id)
    assert page.status_code == 200
    assert "the model went away" in text  # the planner's error, from the case's own evidence
    assert "cannot load the run's plug-in" in text and "Sign and apply" not in text
    assert recorded["environment_fingerprint"] in text and recorded["case_id"] == case.case_id
    shown = json.loads(out.getvalue())
    assert shown["binding"] == json.loads(json.dumps(recorded, default=str))
    assert "cannot load the run's plug-in" in shown["binding_note"]
