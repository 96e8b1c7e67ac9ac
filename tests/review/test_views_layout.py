"""The dashboard's views stay thin (``review/views/__init__.py``): every function in the package is
at most ``MAX_LINES`` lines, docstring included, and every URL's view lives in the package."""

from __future__ import annotations

import ast
from pathlib import Path

from django.urls import get_resolver

import review.views

MAX_LINES = 30
PACKAGE = Path(review.views.__file__).parent


def test_it_keeps_every_view_function_under_30_lines() -> None:
    long = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno + 1 > MAX_LINES:
                long.append(f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == [], "move work to a private helper or a service:\n" + "\n".join(long)


def test_every_dashboard_url_is_served_by_the_views_package() -> None:
    modules = set()
    for entry in get_resolver().url_patterns:
        for pattern in getattr(entry, "url_patterns", [entry]):
            callback = getattr(pattern, "callback", None)
            module = getattr(callback, "__module__", "")
            if module.startswith("review"):
                modules.add(module)
    assert modules and all(m.startswith("review.views.") for m in modules), sorted(modules)
