"""Workspace-relative paths and glob patterns in a task spec (DESIGN.md section 3, allowed scope).

A plan may only name safe relative paths, and a policy's ``allowed_paths`` are fnmatch-style
globs over them. The rule is the adapters' own (``runtime.adapters.paths.relative_path_refusal``),
imported, not restated, so a spec never names a path the adapter will refuse mid-run; a file
path *written in the task spec* is also refused when it enters the workspace's ``.ratchet``
journal or holds an invisible character (DESIGN.md section 2.2). Framework-free: nothing here
imports Django.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from runtime.adapters.paths import relative_path_refusal
from runtime.adapters.workspace.adapter import JOURNAL_DIR, TMP_PREFIX

INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf"})
"""Unicode categories refused in spec paths: control and format characters (U+202E RIGHT-TO-LEFT
OVERRIDE, zero-width spaces and joiners...), which make a path read differently from what it is."""


def relative_path_problem(path: str) -> str | None:
    """Why ``path`` is not a safe workspace-relative path, or None if it is.

    A safe path is non-empty, relative, uses ``/`` separators with no empty, ``.`` or ``..``
    segments, has no NUL byte, and never enters a ``.git`` directory (any case: the git
    metadata of a target is not something a plan may write). The policy gate checks every
    proposed action's paths with it, replayed git commits included, whose names may hold any
    byte git allows (tabs, backslashes); a path *written in a task spec* is held to the
    stricter :func:`spec_path_problem`.
    """
    if not path:
        return "path is empty"
    if "\x00" in path:
        return "path contains a NUL byte"
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        return "path must be relative to the environment target"
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "path has an empty, '.' or '..' segment"
    if any(s.lower() == ".git" for s in segments):
        return "path enters a .git directory"
    return None


def invisible_characters(text: str) -> list[str]:
    """The invisible characters of ``text`` as ``U+XXXX NAME``, in order, duplicates kept once.

    Invisible: Unicode category Cc (control) or Cf (format: bidi overrides and isolates,
    zero-width characters, the BOM). DESIGN.md section 2.2.
    """
    found: list[str] = []
    for char in text:
        if unicodedata.category(char) in INVISIBLE_CATEGORIES:
            label = f"U+{ord(char):04X} {unicodedata.name(char, 'control character')}"
            if label not in found:
                found.append(label)
    return found


def spec_path_problem(path: str) -> str | None:
    """Why a file path written in a task spec is refused at load time, or None.

    The adapters' own rule for file actions (:func:`runtime.adapters.paths.relative_path_refusal`:
    no absolute path, backslash, control character, empty, ``.`` or ``..`` segment, nothing
    into ``.git``), the workspace adapter's reserved journal directory (``.ratchet``, any case)
    and its temporary names (a segment starting ``.ratchet-tmp-``, at any depth, which the
    adapter refuses mid-run), a Windows drive prefix, and any invisible character (:func:`invisible_characters`), which
    would show an approver another name than the one written. DESIGN.md section 2.2.
    """
    refusal = relative_path_refusal(path)
    if refusal is not None:
        return refusal[0]
    if relative_path_refusal(path, reserved=(JOURNAL_DIR,)) is not None:
        return f"path is inside the workspace adapter's own {JOURNAL_DIR} directory"
    if any(part.lower().startswith(TMP_PREFIX) for part in path.split("/")):
        return f"path has a name starting with the workspace adapter's temporary prefix {TMP_PREFIX}"
    problem = relative_path_problem(path)  # adds the drive-letter prefix the adapters allow
    if problem:
        return problem
    invisible = invisible_characters(path)
    if invisible:
        return "path holds invisible characters (" + ", ".join(invisible[:5]) + ")"
    return None


def _check_relative_path(value: str) -> str:
    problem = spec_path_problem(value)
    if problem:
        raise ValueError(f"{problem}: {value!r:.200}")
    return value


def _check_glob(value: str) -> str:
    if not value:
        raise ValueError("glob pattern is empty")
    if value.startswith("/"):
        raise ValueError(f"glob pattern must be relative: {value!r:.200}")
    if any(s in (".", "..") for s in value.split("/")):
        raise ValueError(f"glob pattern has a '.' or '..' segment: {value!r:.200}")
    invisible = invisible_characters(value)
    if invisible:
        raise ValueError("glob pattern holds invisible characters (" + ", ".join(invisible[:5])
                         + f"): {value!r:.200}")
    return value


RelPath = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_check_relative_path)]
GlobPattern = Annotated[str, StringConstraints(max_length=4096), AfterValidator(_check_glob)]


@functools.lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**", i):
            # "**/" may match zero directories, so "**/*.py" matches "a.py" as well as "x/a.py".
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        char = pattern[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            start = i + 1
            negate = pattern[start : start + 1] == "!"
            if negate:
                start += 1
            # A "]" right after "[" or "[!" is a literal member, as in fnmatch.
            end = pattern.find("]", start + 1 if pattern[start : start + 1] == "]" else start)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[start:end].replace("\\", "\\\\").replace("[", "\\[")
                body = body.replace("^", "\\^").replace("]", "\\]")
                # A negated class must still never match a separator.
                out.append(("[^/" if negate else "[") + body + "]")
                i = end + 1
                continue
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_match(pattern: str, path: str) -> bool:
    """Whether ``path`` matches the fnmatch-style ``pattern``, case-sensitively.

    ``*`` and ``?`` never cross a ``/``; ``**`` matches any number of segments (``**/`` also
    zero), ``[abc]``/``[!abc]`` are character classes. ``"**"`` matches every path,
    ``"src/**"`` everything under ``src/``, ``"**/*.md"`` every Markdown file at any depth.
    """
    return _glob_regex(pattern).match(path) is not None


def path_allowed(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` is safe (see :func:`relative_path_problem`) and matches any pattern."""
    return relative_path_problem(path) is None and any(glob_match(p, path) for p in patterns)
