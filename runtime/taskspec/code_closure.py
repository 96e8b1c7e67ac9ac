"""The code a plug-in runs: its entry module's import closure, pinned by content (DESIGN.md section 8.4).

A digest of the entry module's file alone lets a changed module it imports (a risk rule, a
prompt, a schema) run under a resumed run unnoticed. The closure pinned here starts at the
entry module and follows every import its source names (absolute, relative, ``from x import
submodule``) to the modules whose source is *not versioned by an installed distribution*:
scripts on ``sys.path``, editable installs and the working tree. A module that lives in an
installed distribution's ``site-packages`` folder ends the walk there (its distribution's
version is what pins it), except that the entry's own distribution, when it is installed, is
pinned by the digest of its ``RECORD`` file, which lists a hash of every file it installed.
The standard library ends the walk too. Framework-free: imports nothing from Django.

Files are read again whenever their size, modification time or inode changes, so a file
edited under a running process is seen; an unchanged file is hashed and parsed once per process,
and a closure whose files are all unchanged is not walked again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import sys
import sysconfig
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path

_Stat = tuple[int, int, int]
_FILES: dict[str, tuple[_Stat, str, tuple[str, ...]]] = {}
"""path -> (stat key, sha256 hex, the module names its source imports), per process."""

_FOUND: dict[str, ModuleSpec | None] = {}
"""module name -> where a module not imported yet was found (or None), per process."""

_CLOSURES: dict[str, tuple[tuple[tuple[str, str | None, str | None, _Stat | None], ...],
                           list[tuple[str, str]]]] = {}
"""module name -> (every module its walk met: name, where it was found, the file read and its
stat key; the closure), per process. A closure is walked again only when one of those modules is
found elsewhere or one of those files changed: the walk itself (building each module's path,
per plug-in, at every restore) cost more than a few dozen look-ups and stats."""


def code_closure_digest(entry: str) -> str | None:
    """``"sha256:<hex>"`` over the import closure of ``entry``'s module (``"module:Attr"``).

    Args:
        entry: a plug-in entry, ``"package.module:Attr"``.

    Returns:
        The digest of the sorted ``(module name, file digest)`` pairs of the closure, or None
        when the entry module has no source file (built in or frozen).

    Never imports anything: modules are found in ``sys.modules`` or on their parents' paths.
    """
    module = entry.partition(":")[0]
    if _source_of(module) is None:
        return None
    closure = import_closure(module)
    hasher = hashlib.sha256()
    for name, digest in closure:
        hasher.update(f"{name}\0{digest}\n".encode())
    return "sha256:" + hasher.hexdigest()


def import_closure(module: str) -> list[tuple[str, str]]:
    """``[(module name, "sha256:<hex>" of its file), ...]`` of ``module``'s closure, sorted.

    An installed entry module contributes its distribution's ``RECORD`` as
    ``("dist:<name>", digest)`` instead of its own walk.
    """
    cached = _CLOSURES.get(module)
    if cached is not None and all(_origin(name) == origin and (path is None or _stat_key(path) == key)
                                  for name, origin, path, key in cached[0]):
        return list(cached[1])
    walked: list[tuple[str, str | None, str | None, _Stat | None]] = []
    out: dict[str, str] = {}
    queue, seen = [module], set()
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _source_of(name)
        if path is None:
            walked.append((name, _origin(name), None, None))
            continue
        if _installed(path):
            read = None
            if name == module:
                record = _record_digest(path)
                if record:
                    out[f"dist:{record[0]}"] = record[1]
                    read = str(_OWNERS[str(path)][1])  # type: ignore[index] - set by _record_digest
            walked.append((name, _origin(name), read, _stat_key(read) if read else None))
            continue
        walked.append((name, _origin(name), str(path), _stat_key(str(path))))
        digest, imports = _read(path, name)
        out[name] = digest
        queue.extend(imports)
    closure = sorted(out.items())
    _CLOSURES[module] = (tuple(walked), closure)
    return list(closure)


def _origin(name: str) -> str | None:
    spec = _spec(name)
    return spec.origin if spec is not None else None


def _stat_key(path: str) -> _Stat | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _source_of(name: str) -> Path | None:
    spec = _spec(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    path = Path(spec.origin)
    if _stdlib(path):
        return None
    return path


def _spec(name: str) -> ModuleSpec | None:
    """``name``'s spec without importing anything: a module imported already answers from
    ``sys.modules``, any other is looked for in its parent package's folders."""
    loaded = sys.modules.get(name)
    if loaded is not None:
        return getattr(loaded, "__spec__", None)
    if name in _FOUND:
        return _FOUND[name]
    parent, _, _ = name.rpartition(".")
    found = None
    try:
        if not parent:
            # A top-level name has no parent to import: every finder is asked (an editable
            # install's own finder too) and nothing is executed.
            found = importlib.util.find_spec(name)
        else:
            parent_spec = _spec(parent)
            if parent_spec is not None and parent_spec.submodule_search_locations:
                found = PathFinder.find_spec(name, list(parent_spec.submodule_search_locations))
    except (ImportError, ValueError, OSError):
        found = None
    _FOUND[name] = found
    return found


_STDLIB = tuple({sysconfig.get_paths()[key] + os.sep for key in ("stdlib", "platstdlib")})


def _stdlib(path: Path) -> bool:
    return str(path).startswith(_STDLIB) and not _installed(path)


def _installed(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)


def _read(path: Path, name: str) -> tuple[str, tuple[str, ...]]:
    stat = path.stat()
    key = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    cached = _FILES.get(str(path))
    if cached is not None and cached[0] == key:
        return cached[1], cached[2]
    data = path.read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    imports = _imports(data, name=name, is_package=path.name == "__init__.py")
    _FILES[str(path)] = (key, digest, imports)
    return digest, imports


_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)|import[ \t]+([^\n#;]*))",
                     re.MULTILINE)
"""An import statement at the start of a line. A scan, not a parse (parsing every module costs
seconds in a fresh process, inside a lease): a line in a docstring that reads like an import
only adds a candidate, which is pinned if it names a module, so the scan errs towards pinning
more, never less, and gives every process the same closure."""


def _imports(source: bytes, *, name: str, is_package: bool) -> tuple[str, ...]:
    package = name if is_package else name.rpartition(".")[0]
    found: list[str] = []
    for match in _IMPORT.finditer(source.replace(b"\\\n", b" ")):
        base, names, plain = (g.decode("utf-8", "replace") if g else "" for g in match.groups())
        if plain:
            found.extend(part.split()[0] for part in plain.split(",") if part.split())
            continue
        try:
            resolved = importlib.util.resolve_name(base, package) if base.startswith(".") else base
        except (ImportError, ValueError):
            continue
        found.append(resolved)
        for part in names.strip().strip("()").split(","):
            words = part.split()
            if words and words[0] != "*" and words[0].isidentifier():
                found.append(f"{resolved}.{words[0]}")
    with_parents = set()
    for full in found:
        parts = full.split(".")
        if all(part.isidentifier() for part in parts):
            with_parents.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return tuple(sorted(n for n in with_parents if n.partition(".")[0] not in sys.builtin_module_names))


_OWNERS: dict[str, tuple[str, Path] | None] = {}
"""installed module file -> (distribution name, its RECORD file), per process."""


def _record_digest(path: Path) -> tuple[str, str] | None:
    if str(path) not in _OWNERS:
        _OWNERS[str(path)] = _owner(path)
    owner = _OWNERS[str(path)]
    if owner is None:
        return None
    return owner[0], "sha256:" + hashlib.sha256(owner[1].read_bytes()).hexdigest()


def _owner(path: Path) -> tuple[str, Path] | None:
    for dist in importlib.metadata.distributions():
        files = dist.files or []
        if any(Path(str(dist.locate_file(f))) == path for f in files if str(f).endswith(".py")):
            record = next((f for f in files if str(f).endswith("RECORD")), None)
            if record is None:
                return None
            return dist.metadata["Name"], Path(str(dist.locate_file(record)))
    return None
