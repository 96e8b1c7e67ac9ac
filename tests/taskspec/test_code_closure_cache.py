"""A closure is walked once per process and again only when what it was walked from changed
(runtime/taskspec/code_closure.py; DESIGN.md section 8.4)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime.taskspec.code_closure import code_closure_digest


def _package(root: Path, prefix: str) -> None:
    code = root / "closure_cache_pkg"
    code.mkdir(parents=True)
    (code / "__init__.py").write_text("", encoding="utf-8")
    (code / "entry.py").write_text("from closure_cache_pkg.rules import PREFIX\n", encoding="utf-8")
    (code / "rules.py").write_text(f'PREFIX = "{prefix}"\n', encoding="utf-8")


@pytest.fixture
def forget_package():
    yield
    for name in [n for n in sys.modules if n.startswith("closure_cache_pkg")]:
        del sys.modules[name]


def test_an_edited_import_or_a_module_found_elsewhere_is_walked_again(tmp_path, monkeypatch, forget_package):
    _package(tmp_path / "a", "one")
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    import closure_cache_pkg.entry  # noqa: F401 -- as the plug-in loader imports it

    first = code_closure_digest("closure_cache_pkg.entry:X")
    assert code_closure_digest("closure_cache_pkg.entry:X") == first  # unchanged: the same

    (tmp_path / "a" / "closure_cache_pkg" / "rules.py").write_text('PREFIX = "other"\n', encoding="utf-8")
    edited = code_closure_digest("closure_cache_pkg.entry:X")
    assert edited != first

    # The same module names imported from another folder (another checkout of the plug-in).
    for name in [n for n in sys.modules if n.startswith("closure_cache_pkg")]:
        del sys.modules[name]
    _package(tmp_path / "b", "one")
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    import closure_cache_pkg.entry  # noqa: F401,F811

    assert code_closure_digest("closure_cache_pkg.entry:X") == first  # same bytes, found again
    (tmp_path / "b" / "closure_cache_pkg" / "rules.py").write_text('PREFIX = "third"\n', encoding="utf-8")
    assert code_closure_digest("closure_cache_pkg.entry:X") not in (first, edited)
