"""Story: a run resumed while a module its planner *imports* changed fails closed (DESIGN.md section 8.4).

Before, only the planner's entry module was pinned by digest: a changed module it imports (here the
package's risk rule, as in the chat-tools planner) let a resumed run act under rules its definition
never had. Now the entry module's import closure is pinned too: the resume is refused with the typed
``CodeClosureMismatchError``, nothing more is written, and one review case tells a person.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime.bundles.export import bundle_export
from runtime.bundles.verification import bundle_verify
from runtime.engine import run_advance, run_start
from runtime.errors import CodeClosureMismatchError
from runtime.models import ReviewCase, Run
from runtime.taskspec.code_closure import import_closure
from tests.plugins.support import notes_task, require_example_package, store

pytestmark = pytest.mark.django_db(transaction=True)

PLANNER = '''from ratchet_example_agent.planner import NoteTaker
from runtime.core.checkpoint import Action
from runtime.planners.base import PlannerStep

from f12_planner_pkg.rules import PREFIX


class Planner(NoteTaker):
    def propose(self, **kwargs):
        step = NoteTaker.propose(self, **kwargs)
        if isinstance(step.proposal, Action):
            return PlannerStep(step.proposal.model_copy(update={"target": PREFIX + step.proposal.target}),
                               step.state)
        return step
'''


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    code = tmp_path / "code" / "f12_planner_pkg"
    code.mkdir(parents=True)
    (code / "__init__.py").write_text("", encoding="utf-8")
    (code / "planner.py").write_text(PLANNER, encoding="utf-8")
    (code / "rules.py").write_text('PREFIX = "pinned-"\n', encoding="utf-8")
    monkeypatch.syspath_prepend(str(code.parent))
    yield code
    for name in [n for n in sys.modules if n.startswith("f12_planner_pkg")]:
        del sys.modules[name]


def test_f12_the_pinned_closure_names_the_modules_the_entry_imports(package: Path) -> None:
    require_example_package()
    import f12_planner_pkg.planner  # noqa: F401 -- the plug-in loader imports it the same way

    names = [name for name, _ in import_closure("f12_planner_pkg.planner")]
    assert {"f12_planner_pkg", "f12_planner_pkg.planner", "f12_planner_pkg.rules"} <= set(names)


def test_f12_a_changed_imported_module_refuses_the_resume_with_a_typed_reason_and_a_case(
        tmp_path: Path, package: Path) -> None:
    require_example_package()
    task = notes_task(tmp_path, notes=3, planner='kind = "python"\nentry = "f12_planner_pkg.planner:Planner"',
                      verifier='kind = "always"')
    run_id = run_start(spec_path=task)
    run_advance(run_id=run_id, max_steps=2)
    written = dict(store(tmp_path)["data"])
    assert list(written) == ["pinned-note-1"]
    generation = Run.objects.get(run_id=run_id).generation

    (package / "rules.py").write_text('PREFIX = "changed-"\n', encoding="utf-8")

    for worker in ("worker-b", "worker-c"):
        with pytest.raises(CodeClosureMismatchError, match="imports code that changed"):
            run_advance(run_id=run_id, worker=worker)

    assert dict(store(tmp_path)["data"]) == written
    assert Run.objects.get(run_id=run_id).generation == generation
    [case] = ReviewCase.objects.filter(run_id=run_id)
    assert (case.reason, case.status) == ("code_changed", "open")
    assert case.detail.startswith("CodeClosureMismatchError")

    (package / "rules.py").write_text('PREFIX = "pinned-"\n', encoding="utf-8")
    assert run_advance(run_id=run_id, worker="worker-d").phase == "completed"
    # The case was opened on the rows alone: the run's bundle still verifies.
    assert bundle_verify(bundle_export(run_id=run_id, exported_by="f12")) == []
