"""A git-flavoured unified diff of one file, for ``dry_run_diff`` (DESIGN.md section 6).

Reviewers read these diffs before approving a write, so they look like ``git diff`` output:
``diff --git`` headers, file modes, and ``Binary files ... differ`` for content with a NUL byte
or invalid UTF-8. Imports nothing from Django.
"""

from __future__ import annotations

import difflib


def git_mode(executable: bool) -> str:
    """Git's file mode text for a regular file: ``"100755"`` or ``"100644"``."""
    return "100755" if executable else "100644"


def unified_diff(path: str, old: bytes | None, old_exec: bool, new: bytes | None,
                  new_exec: bool) -> str:
    """A git-flavoured unified diff of ``path`` from ``old`` to ``new`` (None = absent).

    Args:
        path: the relative path shown in the headers.
        old, new: the content before and after; None when the file does not exist.
        old_exec, new_exec: the executable bit before and after.

    Returns:
        The diff text; ``""`` when nothing changes.
    """
    a = f"a/{path}" if old is not None else "/dev/null"
    b = f"b/{path}" if new is not None else "/dev/null"
    out = [f"diff --git a/{path} b/{path}\n"]
    if old is None:
        out.append(f"new file mode {git_mode(new_exec)}\n")
    elif new is None:
        out.append(f"deleted file mode {git_mode(old_exec)}\n")
    elif old_exec != new_exec:
        out.append(f"old mode {git_mode(old_exec)}\nnew mode {git_mode(new_exec)}\n")
    if old == new:
        return "".join(out) if len(out) > 1 else ""
    texts = []
    for data in (old, new):
        if data is None:
            texts.append([])
            continue
        if b"\0" in data:
            texts = None
            break
        try:
            texts.append(data.decode("utf-8").splitlines(keepends=True))
        except UnicodeDecodeError:
            texts = None
            break
    if texts is None:
        out.append(f"Binary files {a} and {b} differ\n")
        return "".join(out)
    for line in difflib.unified_diff(texts[0], texts[1], fromfile=a, tofile=b):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
