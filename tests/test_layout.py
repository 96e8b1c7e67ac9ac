"""The layout rules of the code base, checked on the import graph and on the files themselves.

Story: an engineer adds a feature by importing whatever is nearest. These tests keep the shape
the layout page of the docs (runtime/docs/concepts/layout.md) describes, and say exactly which line breaks it:

1. **No import circles** among the modules of ``runtime`` and ``review``. The graph is built
   with ``grimp``, which reads every ``import`` statement in the source: at module level, inside
   a function (a lazy import is still an edge: it only moves the circle to run time) and under
   ``if TYPE_CHECKING:`` (a circle in the types is a circle in the design). A package's
   ``__init__`` is a module like any other, so a submodule that imports from its own package
   while the package imports the submodule is a circle too. Each strongly connected component
   of more than one module is reported with the import lines that tie it.
2. **``runtime.core`` imports nothing from Django**, directly or through any module it imports
   (the whole chain is reported). This is the static half; ``tests/core/`` also imports the core
   in a fresh interpreter and inspects ``sys.modules``.
3. **No module over 400 lines** in ``runtime/`` or ``review/`` (migrations, which are
   generated, excepted), unless its module docstring says why on a line of its own that starts
   with ``Over 400 lines:`` followed by the reason, for example::

       Over 400 lines: one state machine table and its checks read best in one place.

   The count is physical lines of the file, as ``wc -l`` counts them.
4. **Layers between folders** (the design document's Overview, "Where to start reading"):

   * no loop between folders: a *folder* is ``runtime.<name>`` or ``review.<name>`` with all
     it contains, and one folder importing another that imports it back (through any chain) is
     a loop even when no two modules form a circle;
   * the adapters (``runtime.adapters``) import nothing of Django and, of Ratchet, only the
     framework-free core, the errors and the plug-in registry: never the engine, a store or a
     model;
   * the runtime app imports nothing from ``review``; only the project package
     (``runtime.project``, which wires the apps together) does;
   * no module of the apps imports the project package, except ``runtime/__init__.py``, which
     gives ``celery -A runtime`` the project's Celery app;
   * ``review`` reads what a receipt's write left through the adapter-neutral interface
     (``runtime.adapters.readback`` and its types in ``runtime.adapters.landed``), never an
     adapter's own modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import grimp
import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("runtime", "review")
MAX_LINES = 400
REASON_PREFIX = "Over 400 lines:"
FRAMEWORK_FREE = "runtime.core"
FORBIDDEN = "django"
PROJECT = "runtime.project"
ADAPTERS = "runtime.adapters"
ADAPTERS_MAY_IMPORT = ("runtime.core", "runtime.errors", "runtime.plugins", ADAPTERS)
REVIEW_MAY_READ_ADAPTERS = ("runtime.adapters.readback", "runtime.adapters.landed")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    """The import graph of ``runtime`` and ``review``, with third-party packages as single nodes.

    ``cache_dir=None``: grimp would otherwise write a cache folder into the working directory.
    """
    return grimp.build_graph(*PACKAGES, include_external_packages=True, cache_dir=None)


def strongly_connected_components(nodes: Iterable[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on deep graphs); components in
    discovery order, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges.get(successor, ())))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _module_file(module: str, root: Path = REPO) -> str:
    path = root.joinpath(*module.split("."))
    if (path / "__init__.py").exists():
        return str((path / "__init__.py").relative_to(root))
    return str(path.with_suffix(".py").relative_to(root))


def _import_lines(graph: grimp.ImportGraph, importer: str, imported: str, root: Path = REPO) -> list[str]:
    details = graph.get_import_details(importer=importer, imported=imported)
    return [
        f"    {_module_file(importer, root)}:{d['line_number']}: {d['line_contents'].strip()}"
        for d in sorted(details, key=lambda d: d["line_number"])
    ] or [f"    {importer} -> {imported}"]


def import_circles(graph: grimp.ImportGraph, packages: Iterable[str] = PACKAGES, root: Path = REPO) -> list[str]:
    """One report per circle: its modules, then every import line between two of them."""
    top = set(packages)
    modules = {m for m in graph.modules if m.split(".")[0] in top}
    edges = {m: {i for i in graph.find_modules_directly_imported_by(m) if i in modules} for m in modules}
    reports = []
    for component in strongly_connected_components(modules, edges):
        if len(component) == 1 and component[0] not in edges[component[0]]:
            continue
        members = set(component)
        lines = [f"circle of {len(component)} modules: {', '.join(component)}"]
        for importer in component:
            for imported in sorted(edges[importer] & members):
                lines.extend(_import_lines(graph, importer, imported, root))
        reports.append("\n".join(lines))
    return reports


def framework_chains(graph: grimp.ImportGraph) -> list[str]:
    """Each shortest chain by which a module of ``runtime.core`` reaches Django."""
    if FORBIDDEN not in graph.modules:
        return []
    chains = graph.find_shortest_chains(importer=FRAMEWORK_FREE, imported=FORBIDDEN, as_packages=True)
    reports = []
    for chain in sorted(chains):
        lines = [" -> ".join(chain)]
        for importer, imported in zip(chain, chain[1:], strict=False):
            lines.extend(_import_lines(graph, importer, imported))
        reports.append("\n".join(lines))
    return reports


def _modules_on_disk() -> list[Path]:
    files = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).parts
            if "migrations" in parts or "__pycache__" in parts:
                continue
            files.append(path)
    return files


def has_reason(source: str) -> bool:
    """True when the module docstring has a line ``Over 400 lines: <reason>``."""
    try:
        docstring = ast.get_docstring(ast.parse(source)) or ""
    except SyntaxError:
        return False
    return any(
        line.strip().startswith(REASON_PREFIX) and line.strip()[len(REASON_PREFIX) :].strip()
        for line in docstring.splitlines()
    )


def oversized_modules() -> list[str]:
    found = []
    for path in _modules_on_disk():
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n") + (0 if source.endswith("\n") or not source else 1)
        if lines > MAX_LINES and not has_reason(source):
            found.append(f"{path.relative_to(REPO)}: {lines} lines")
    return found


def test_it_finds_a_circle_and_the_lines_that_tie_it():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    components = strongly_connected_components(edges, edges)
    assert ["a", "b", "c"] in components
    assert ["d"] in components and ["e"] in components


def test_it_sees_a_circle_closed_by_an_import_inside_a_function(tmp_path, monkeypatch):
    package = tmp_path / "layoutprobe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "engine.py").write_text("from layoutprobe.approvals import check\n")
    (package / "approvals.py").write_text(
        "def check():\n    from layoutprobe.engine import run  # lazy, still an edge\n    return run\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = grimp.build_graph("layoutprobe", cache_dir=None)

    circles = import_circles(probe, packages=("layoutprobe",), root=tmp_path)

    assert len(circles) == 1
    assert "layoutprobe.approvals, layoutprobe.engine" in circles[0]
    assert "layoutprobe/approvals.py:2: from layoutprobe.engine import run" in circles[0]


def test_it_accepts_a_long_module_only_with_its_reason():
    assert has_reason('"""Title.\n\nOver 400 lines: one table reads best whole.\n"""\n')
    assert not has_reason('"""Title.\n\nOver 400 lines:\n"""\n')
    assert not has_reason('"""Title."""\n# Over 400 lines: a comment is not the docstring\n')


def test_it_has_no_import_circles(graph):
    circles = import_circles(graph)
    assert not circles, "import circles in runtime/ and review/:\n\n" + "\n\n".join(circles)


def test_it_keeps_the_core_free_of_django(graph):
    chains = framework_chains(graph)
    assert not chains, f"{FRAMEWORK_FREE} reaches {FORBIDDEN}:\n\n" + "\n\n".join(chains)


def test_it_keeps_modules_under_400_lines_or_says_why():
    oversized = oversized_modules()
    assert not oversized, (
        f"modules over {MAX_LINES} lines without a '{REASON_PREFIX} <reason>' line in their module "
        "docstring (split them by concept, or say why they must stay whole):\n" + "\n".join(oversized)
    )


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _ours(graph: grimp.ImportGraph) -> list[str]:
    return sorted(m for m in graph.modules if m.split(".")[0] in PACKAGES)


def folder_of(module: str) -> str:
    """The folder a module belongs to for the layer rule: ``runtime.checkpoints.session`` ->
    ``runtime.checkpoints``; a module directly in ``runtime/`` or ``review/`` is its own folder."""
    return ".".join(module.split(".")[:2])


def folder_loops(graph: grimp.ImportGraph) -> list[str]:
    """One report per loop between folders, with one import line for each folder edge in it."""
    edges: dict[str, set[str]] = {}
    witness: dict[tuple[str, str], tuple[str, str]] = {}
    for module in _ours(graph):
        for imported in graph.find_modules_directly_imported_by(module):
            if imported.split(".")[0] not in PACKAGES:
                continue
            a, b = folder_of(module), folder_of(imported)
            if a != b:
                edges.setdefault(a, set()).add(b)
                witness.setdefault((a, b), (module, imported))
    nodes = set(edges) | {b for targets in edges.values() for b in targets}
    reports = []
    for component in strongly_connected_components(nodes, edges):
        if len(component) < 2:
            continue
        members = set(component)
        lines = [f"loop of {len(component)} folders: {', '.join(component)}"]
        for a in component:
            for b in sorted(edges.get(a, set()) & members):
                lines.extend(_import_lines(graph, *witness[(a, b)]))
        reports.append("\n".join(lines))
    return reports


def forbidden_imports(graph: grimp.ImportGraph) -> list[str]:
    """Every import that breaks one of the folder rules of rule 4, with its line."""
    found = []
    for module in _ours(graph):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            ours = imported.split(".")[0] in PACKAGES
            if _inside(module, ADAPTERS):
                if _inside(imported, FORBIDDEN) or (
                        ours and not any(_inside(imported, p) for p in ADAPTERS_MAY_IMPORT)):
                    found.append(("an adapter reaches past the core, errors and registry", module, imported))
            if _inside(module, "runtime") and not _inside(module, PROJECT) and _inside(imported, "review"):
                found.append(("the runtime app imports review", module, imported))
            if (_inside(imported, PROJECT) and not _inside(module, PROJECT) and module != "runtime"):
                found.append(("an app module imports the project package", module, imported))
            if (_inside(module, "review") and _inside(imported, ADAPTERS)
                    and not any(_inside(imported, p) for p in REVIEW_MAY_READ_ADAPTERS)):
                found.append(("review reads an adapter's own module", module, imported))
    return [f"{why}:\n" + "\n".join(_import_lines(graph, module, imported))
            for why, module, imported in found]


def test_it_finds_a_loop_between_folders_that_no_module_circle_shows(tmp_path, monkeypatch):
    package = tmp_path / "layoutfold"
    for folder in ("engine", "workers"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "engine" / "cancel.py").write_text("from layoutfold.workers.dispatch import enqueue\n")
    (package / "workers" / "dispatch.py").write_text("enqueue = None\n")
    (package / "workers" / "tasks.py").write_text("from layoutfold.engine.cancel import enqueue\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    probe = grimp.build_graph("layoutfold", cache_dir=None)
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGES"]), "PACKAGES", ("layoutfold",))

    loops = folder_loops(probe)

    assert not import_circles(probe, packages=("layoutfold",), root=tmp_path)
    assert len(loops) == 1 and "layoutfold.engine, layoutfold.workers" in loops[0]


def test_it_has_no_loops_between_folders(graph):
    loops = folder_loops(graph)
    assert not loops, "loops between folders of runtime/ and review/:\n\n" + "\n\n".join(loops)


def test_it_keeps_the_folder_rules(graph):
    broken = forbidden_imports(graph)
    assert not broken, "imports that break the folder rules:\n\n" + "\n\n".join(broken)
