"""The repository's own text files, as the citation and wording checks read them.

``tests/test_design_references.py``, ``tests/test_style_references.py`` and
``tests/test_no_issue_references.py`` scan the same files: every text file under ``runtime/``,
``review/``, ``templates/`` and ``tests/``, and ``README.md``.
"""

from __future__ import annotations

from pathlib import Path

SCANNED = ("runtime", "review", "templates", "tests")
"""Folders whose text files are read, recursively."""
SCANNED_FILES = ("README.md",)
"""Single files read beside them."""
TEXT_SUFFIXES = frozenset({".py", ".html", ".md", ".txt", ".toml", ".js", ".css", ".json", ".cfg", ".ini"})
"""What counts as a text file (by suffix); ``__pycache__`` is never read."""


def scanned_files(repo: Path, *, skip: set[Path] | frozenset[Path] = frozenset()) -> list[Path]:
    """The text files of ``repo`` the checks read, ``README.md`` first, the rest sorted, without
    the resolved paths in ``skip`` (a checked document itself, a test that spells its patterns)."""
    files = [repo / name for name in SCANNED_FILES]
    for folder in SCANNED:
        for path in sorted((repo / folder).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    skipped = {path.resolve() for path in skip}
    return [path for path in files if path.exists() and path.resolve() not in skipped]


def line_of(text: str, offset: int) -> int:
    """The 1-based line of ``text`` that holds character ``offset``."""
    return text.count("\n", 0, offset) + 1


def repo_citing(tmp_path: Path, text: str) -> Path:
    """A throwaway repository under ``tmp_path`` whose only scanned text is ``text``, in the
    docstring of ``runtime/cites.py`` (and an empty ``README.md``); returns its root."""
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "cites.py").write_text(f'"""{text}"""\n', encoding="utf-8")
    (tmp_path / "README.md").write_text("", encoding="utf-8")
    return tmp_path


def assert_judged(found: list[str], problem: str | None) -> None:
    """A check's findings on a one-citation repository: none when ``problem`` is None, else
    exactly one, naming ``problem``."""
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and problem in found[0], found
