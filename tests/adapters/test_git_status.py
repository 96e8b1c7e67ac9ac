"""Story: the working tree's status is asked of libgit2 in the process, and its answer is taken
only when it is "nothing uncommitted"; every other answer, and every repository libgit2 may judge
differently, is git's own output (DESIGN.md section 5.5)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
import pytest
from pygit2.enums import ConfigLevel

from runtime.adapters.git.process import GitProcess
from runtime.adapters.git.status import StatusRecord, WorktreeStatus
from tests.adapters.support import git, make_repo


def _git_says(root: Path) -> list[StatusRecord]:
    """What the adapter's git child prints, run directly."""
    out = GitProcess(root).run(["status", "--porcelain=v1", "-z", "--untracked-files=all",
                                "--no-renames", "--ignore-submodules=none"]).stdout
    return [(r[:2], r[3:]) for r in out.split(b"\0") if len(r) >= 4]


def _status(root: Path) -> WorktreeStatus:
    return WorktreeStatus(git=GitProcess(root), git_dir=root / ".git")


def _modify(root: Path) -> None:
    (root / "README.md").write_text("# changed\n")


def _delete(root: Path) -> None:
    (root / "src" / "app.py").unlink()


def _untracked_nested(root: Path) -> None:
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "file.txt").write_text("x\n")


def _staged_then_edited(root: Path) -> None:
    (root / "README.md").write_text("# staged\n")
    git(root, "add", "README.md")
    (root / "README.md").write_text("# edited after\n")


def _staged_new(root: Path) -> None:
    (root / "added.txt").write_text("new\n")
    git(root, "add", "added.txt")


def _mode_flip(root: Path) -> None:
    (root / "run.sh").chmod(0o644)


def _symlink_retargeted(root: Path) -> None:
    (root / "escape").unlink()
    os.symlink("elsewhere", root / "escape")


def _file_becomes_directory(root: Path) -> None:
    (root / "README.md").unlink()
    (root / "README.md").mkdir()
    (root / "README.md" / "inner.txt").write_text("x\n")


def _intent_to_add(root: Path) -> None:
    (root / "later.txt").write_text("later\n")
    git(root, "add", "-N", "later.txt")


def _non_utf8_name(root: Path) -> None:
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")


def _same_size_same_second_edit(root: Path) -> None:
    # Racily clean: same size, written right after the index; git and libgit2 must both hash it.
    git(root, "update-index", "--refresh")
    (root / "README.md").write_text("# dEmo\n")


DIRTY: list[Callable[[Path], None]] = [
    _modify, _delete, _untracked_nested, _staged_then_edited, _staged_new, _mode_flip,
    _symlink_retargeted, _file_becomes_directory, _intent_to_add, _non_utf8_name,
    _same_size_same_second_edit,
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_a_clean_tree_is_answered_in_process(tree: Path) -> None:
    status = _status(tree)

    assert status.records() == [] == _git_says(tree)
    assert status.in_process_answers == 1


def test_ignored_files_leave_the_tree_clean_in_process(tree: Path) -> None:
    (tree / ".gitignore").write_text("*.log\nbuild/\n")
    git(tree, "add", ".gitignore")
    git(tree, "commit", "-q", "-m", "ignore logs")
    (tree / "debug.log").write_text("noise\n")
    (tree / "build").mkdir()
    (tree / "build" / "out.bin").write_bytes(b"\0")
    status = _status(tree)

    assert status.records() == [] == _git_says(tree)
    assert status.in_process_answers == 1


@pytest.mark.parametrize("change", DIRTY, ids=lambda f: f.__name__.strip("_"))
def test_anything_uncommitted_is_reported_as_git_prints_it(tree: Path,
                                                           change: Callable[[Path], None]
                                                           ) -> None:
    status = _status(tree)
    assert status.records() == []
    change(tree)

    said = status.records()

    assert said == _git_says(tree) and said, "the records are git's own, byte for byte"
    assert status.in_process_answers == 1, "only the clean look was answered in-process"


def test_submodules_are_always_asked_of_git(tree: Path) -> None:
    (tree / ".gitmodules").write_text('[submodule "lib"]\n\tpath = lib\n\turl = ../lib\n')
    git(tree, "add", ".gitmodules")
    git(tree, "commit", "-q", "-m", "declare a submodule")
    status = _status(tree)

    assert status.records() == [] == _git_says(tree)
    assert status.in_process_answers == 0


def test_a_gitlink_in_the_index_is_asked_of_git(tree: Path) -> None:
    head = git(tree, "rev-parse", "HEAD").strip()
    git(tree, "update-index", "--add", "--cacheinfo", f"160000,{head},vendored")
    git(tree, "commit", "-q", "-m", "a gitlink without .gitmodules")
    status = _status(tree)

    assert status.records() == _git_says(tree)
    assert status.in_process_answers == 0


def test_a_local_autocrlf_the_git_child_overrides_is_asked_of_git(tree: Path) -> None:
    git(tree, "config", "core.autocrlf", "true")
    # The git child runs with autocrlf off: a CRLF copy of an LF file is a change to it.
    (tree / "README.md").write_bytes(b"# demo\r\n")
    status = _status(tree)

    assert status.records() == _git_says(tree) == [(b" M", b"README.md")]
    assert status.in_process_answers == 0


@pytest.fixture
def foreign_config(tmp_path: Path) -> Iterator[Path]:
    """libgit2's global and XDG search paths pointed at a scratch home (the git child reads
    neither); restored afterwards."""
    home = tmp_path / "home"
    (home / "xdg").mkdir(parents=True)
    paths = pygit2.settings.search_path
    saved = {level: paths[level] for level in (ConfigLevel.GLOBAL, ConfigLevel.XDG)}
    paths[ConfigLevel.GLOBAL] = str(home)
    paths[ConfigLevel.XDG] = str(home / "xdg")
    try:
        yield home
    finally:
        for level, value in saved.items():
            paths[level] = value


def test_a_global_excludes_file_the_git_child_never_reads_sends_the_look_to_git(
        tree: Path, foreign_config: Path) -> None:
    (foreign_config / "ignored-here").write_text("scratch.txt\n")
    (foreign_config / ".gitconfig").write_text(
        f"[core]\n\texcludesFile = {foreign_config / 'ignored-here'}\n")
    (tree / "scratch.txt").write_text("untracked to git\n")
    status = _status(tree)

    assert status.records() == _git_says(tree) == [(b"??", b"scratch.txt")]
    assert status.in_process_answers == 0


def test_an_xdg_ignore_file_the_git_child_never_reads_sends_the_look_to_git(
        tree: Path, foreign_config: Path) -> None:
    (foreign_config / "xdg" / "ignore").write_text("scratch.txt\n")
    (tree / "scratch.txt").write_text("untracked to git\n")
    status = _status(tree)

    assert status.records() == _git_says(tree) == [(b"??", b"scratch.txt")]
    assert status.in_process_answers == 0


def test_a_changed_repository_config_is_read_again(tree: Path) -> None:
    excludes = tree.parent / "local-excludes"
    excludes.write_text("scratch.txt\n")
    git(tree, "config", "core.excludesFile", str(excludes))
    (tree / "scratch.txt").write_text("ignored, then not\n")
    status = _status(tree)
    assert status.records() == [] == _git_says(tree)

    git(tree, "config", "--unset", "core.excludesFile")

    assert status.records() == _git_says(tree) == [(b"??", b"scratch.txt")]


# The gates above are checked on dirty trees, where git is asked anyway once libgit2 sees a
# change. These check each gate on a tree both libgit2 and git call clean, so the only reason git
# is asked is the gate itself: without it, libgit2 would answer in-process.


def test_a_clean_tree_with_a_gitlink_is_still_asked_of_git(tree: Path) -> None:
    head = git(tree, "rev-parse", "HEAD").strip()
    git(tree, "clone", "-q", str(tree), str(tree / "vendored"))
    git(tree / "vendored", "checkout", "-q", head)
    git(tree, "update-index", "--add", "--cacheinfo", f"160000,{head},vendored")
    git(tree, "commit", "-q", "-m", "a gitlink without .gitmodules, checked out at its commit")
    status = _status(tree)

    assert status.records() == _git_says(tree) == []
    assert status.in_process_answers == 0


def test_a_clean_tree_with_autocrlf_on_is_still_asked_of_git(tree: Path) -> None:
    git(tree, "config", "core.autocrlf", "input")
    status = _status(tree)

    assert status.records() == _git_says(tree) == []
    assert status.in_process_answers == 0


def test_a_clean_tree_with_a_split_index_is_asked_of_git(tree: Path) -> None:
    git(tree, "update-index", "--split-index")
    assert any(name.startswith("sharedindex.") for name in os.listdir(tree / ".git"))
    status = _status(tree)

    assert status.records() == _git_says(tree) == []
    assert status.in_process_answers == 0


def test_a_split_index_is_sent_to_git_before_libgit2_reads_it(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The split-index gate decides on its own: the libgit2 this project ships refuses the index's
    ``link`` extension (a GitError, which also sends the look to git), so only watching whether
    libgit2 was asked at all tells the gate from that fallback; a libgit2 that reads split
    indexes must not be trusted with them either."""
    git(tree, "update-index", "--split-index")
    asked: list[str] = []
    real = pygit2.Repository.status

    def watched(self: pygit2.Repository, *args: object, **kwargs: object) -> object:
        asked.append(str(self.workdir))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pygit2.Repository, "status", watched)
    status = _status(tree)

    assert status.records() == _git_says(tree) == []
    assert status.in_process_answers == 0
    assert asked == []
