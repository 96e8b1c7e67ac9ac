"""Uncommitted entries of a git working tree: libgit2 in the process when it sees none, git else.

The environment fingerprint (:mod:`runtime.adapters.git.state`) is made of ``git status
--porcelain=v1`` records. The engine looks at the environment five times per write (DESIGN.md
section 5.5), and each ``git status`` child cost 3-11 ms in measurements (a child's start, the
pack files opened again, racily clean entries hashed again because the adapter's children never
write the index). libgit2 answers "is anything uncommitted?" inside the process in about a
millisecond. Its answer is taken only when it is *nothing*: then git would print nothing either
and the records are ``[]``. When libgit2 sees anything, cannot tell, or the repository has
something libgit2 may judge differently from the git child, the git child is asked, so every
non-empty fingerprint is git's own output, byte for byte, as it always was.

Where the two could disagree and what is done (a false "clean" is the only unsafe direction):

* config the git child never reads (it runs without system, global or XDG config; see
  :mod:`runtime.adapters.git.process`) but libgit2 does: any ``core.*`` value from those levels,
  a non-``false`` ``core.autocrlf`` (the child overrides it), or an XDG default ``ignore`` /
  ``attributes`` file that libgit2 would read and the child would not -> git is asked;
* submodules (libgit2 honours a submodule's configured ``ignore``, ``--ignore-submodules=none``
  does not): a ``.gitmodules`` file, or any gitlink entry in the index -> git is asked;
* a split index (``sharedindex.*``), an index libgit2 cannot read, any libgit2 error -> git.

The repository object is opened again whenever a config file it read changes, so a cached
config value never outlives its file. Imports nothing from Django.
"""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
from pygit2.enums import ConfigLevel

from runtime.adapters.git.process import GitProcess

_GITLINK_MODE = (0o160000).to_bytes(4, "big")
"""An index entry's 32-bit mode for a gitlink; a match anywhere in the index file (also a false
one inside a hash or a path) sends the question to git, which is only slower."""

_FOREIGN_LEVELS = frozenset({ConfigLevel.SYSTEM, ConfigLevel.XDG, ConfigLevel.GLOBAL,
                             ConfigLevel.PROGRAMDATA})

StatusRecord = tuple[bytes, bytes]
"""``(XY, path)`` of one ``git status --porcelain=v1 -z`` record, both as git printed them."""


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class WorktreeStatus:
    """The ``git status`` records of one repository's working tree (see the module docstring).

    Args:
        git: the adapter's git runner (its root is the working tree's top).
        git_dir: the repository's ``.git`` directory.
    """

    def __init__(self, *, git: GitProcess, git_dir: Path) -> None:
        self._git = git
        self._git_dir = git_dir
        self.root = git.root
        xdg = Path(pygit2.settings.search_path[ConfigLevel.XDG] or os.devnull)
        glob = Path(pygit2.settings.search_path[ConfigLevel.GLOBAL] or os.devnull)
        system = Path(pygit2.settings.search_path[ConfigLevel.SYSTEM] or os.devnull)
        self._watched = (git_dir / "config", git_dir / "config.worktree", glob / ".gitconfig",
                         xdg / "config", xdg / "ignore", xdg / "attributes",
                         system / "gitconfig")
        self._stamps: tuple[tuple[int, int, int] | None, ...] | None = None
        self._repo: pygit2.Repository | None = None
        self.in_process_answers = 0
        """How many looks libgit2 answered (the tests read it)."""

    def records(self) -> list[StatusRecord]:
        """What ``git status --porcelain=v1 -z --untracked-files=all --no-renames
        --ignore-submodules=none`` prints, as ``(XY, path)`` pairs in git's order.

        Raises:
            AdapterCommandError: git failed (only when git is asked).
        """
        if self._clean_in_process():
            self.in_process_answers += 1
            return []
        out = self._git.run(["status", "--porcelain=v1", "-z", "--untracked-files=all",
                             "--no-renames", "--ignore-submodules=none"],
                            env={"GIT_OPTIONAL_LOCKS": "0"}).stdout
        return [(record[:2], record[3:]) for record in out.split(b"\0") if len(record) >= 4]

    def _clean_in_process(self) -> bool:
        repo = self._repository()
        if repo is None or (self.root / ".gitmodules").exists():
            return False
        try:
            if any(name.startswith("sharedindex.") for name in os.listdir(self._git_dir)):
                return False
            if _GITLINK_MODE in (self._git_dir / "index").read_bytes():
                return False
            # libgit2 reads the index again when its file changed and never writes it here.
            return not repo.status(untracked_files="all", ignored=False)
        except (pygit2.GitError, OSError, ValueError, KeyError):
            return False

    def _repository(self) -> pygit2.Repository | None:
        """The libgit2 repository, opened again when a config file changed; None when its
        config could make libgit2 judge differently from the git child."""
        stamps = tuple(_stamp(p) for p in self._watched)
        if stamps != self._stamps:
            self._stamps, self._repo = stamps, None
            try:
                repo = pygit2.Repository(str(self._git_dir))
                if self._comparable(repo, xdg_files=(stamps[4], stamps[5])):
                    self._repo = repo
            except (pygit2.GitError, OSError, ValueError, KeyError):
                self._repo = None
        return self._repo

    @staticmethod
    def _comparable(repo: pygit2.Repository, *, xdg_files: tuple[object, object]) -> bool:
        config = repo.config
        names: set[str] = set()
        for entry in config:
            name = entry.name.lower()
            if name.startswith("core."):
                if entry.level in _FOREIGN_LEVELS:
                    return False
                names.add(name)
        if "core.autocrlf" in names and config["core.autocrlf"].lower() != "false":
            return False
        ignore, attributes = xdg_files
        return not ((ignore is not None and "core.excludesfile" not in names)
                    or (attributes is not None and "core.attributesfile" not in names))
