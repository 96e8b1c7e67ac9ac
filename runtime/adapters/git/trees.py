"""Building a write's tree and commit object without touching the index or the working tree.

In-process with libgit2 (``pygit2``): the blobs are written to the object database, an
in-memory index is read from the parent's tree, one entry per change is added (regular file,
executable, symlink, gitlink) or removed (deletes first, so a path can turn from a file into a
directory and back within one commit), and the index is written out as trees; unchanged subtrees
keep their ids. The commit object is written as raw bytes, so the message, identities, dates and
``encoding`` header are exactly the planned bytes (``commit-tree`` would re-wrap identities and
could not keep an explicit encoding header). Objects are written before the ref moves; until then
they are unreferenced garbage, never state (DESIGN.md section 5). Predictions write into a scratch
object directory that reads the real one as an alternate (:func:`scratch_objects`), so they
write nothing to the repository. Imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2

from runtime.adapters.git.commit_params import GITLINK, SYMLINK, CommitPlan, GitChange
from runtime.adapters.git.process import GitProcess
from runtime.errors import AdapterCommandError, PathEscapeError, PreconditionFailedError

TREE = "040000"


def tree_modes(repo: pygit2.Repository, tree: str, paths: list[str]) -> dict[str, str]:
    """``path -> mode`` for those of ``paths`` that exist in ``tree`` (``"040000"`` for trees).

    Read in-process with libgit2 (no git child). Modes are as git reads them: an old tree's
    ``100664`` or zero-padded ``040000`` comes back as ``100644`` / ``040000``, as from
    ``git ls-tree``.

    Raises:
        AdapterCommandError: ``tree`` cannot be read.
    """
    try:
        root = repo[tree].peel(pygit2.Tree)
    except (pygit2.GitError, KeyError, ValueError) as exc:
        raise AdapterCommandError(f"cannot read tree {tree}: {exc}") from None
    modes: dict[str, str] = {}
    for path in paths:
        try:
            entry = root[path]
        except (KeyError, pygit2.GitError, ValueError):
            continue  # not in the tree (or a file is on the way; the caller checks prefixes)
        modes[path] = f"{entry.filemode:06o}"
    return modes


def check_paths(git: GitProcess, repo: pygit2.Repository, tree: str, plan: CommitPlan) -> None:
    """Refuse changes that would write through a link, over data, or delete nothing.

    A commit may replace, delete or turn into a directory anything it names; file actions
    (``plan.strict_links``) never replace or delete a symlink or a submodule.

    Raises:
        PathEscapeError: a symlink on the path (in the tree or the working tree).
        PreconditionFailedError: a file, submodule, directory or untracked file in the way,
            or a delete of a path that is not in the tree.
    """
    prefixes: list[str] = []
    for change in plan.changes:
        parts = change.path.split("/")
        prefixes.extend("/".join(parts[: i + 1]) for i in range(len(parts)))
    modes = tree_modes(repo, tree, list(dict.fromkeys(prefixes)))
    deleted = {c.path for c in plan.changes if c.mode is None}
    for change in plan.changes:
        parts = change.path.split("/")
        for i in range(len(parts) - 1):
            sub = "/".join(parts[: i + 1])
            mode, on_disk = modes.get(sub), git.root / sub
            if mode == TREE:
                if on_disk.is_symlink():
                    raise PathEscapeError("a symlink in the working tree is on the path", path=sub)
                continue
            if mode is not None:
                if sub in deleted:
                    break  # this commit removes the entry, so it can become a directory
                if mode == SYMLINK:
                    raise PathEscapeError("a symlink is on the path; links are never written "
                                          "through", path=sub)
                raise PreconditionFailedError("a file or submodule is in the way", path=sub)
            if os.path.lexists(on_disk) and (on_disk.is_symlink() or not on_disk.is_dir()):
                # An ignored file in the way: the checkout after the ref update would silently
                # overwrite local data nobody approved losing.
                raise PreconditionFailedError("an untracked or ignored file is in the way",
                                              path=sub)
            break
        else:
            _check_last(git, tree, change, modes.get(change.path), deleted,
                        strict=plan.strict_links)


def _check_last(git: GitProcess, tree: str, change: GitChange, mode: str | None,
                deleted: set[str], *, strict: bool) -> None:
    on_disk = git.root / change.path
    if mode is None:
        if change.mode is None:
            raise PreconditionFailedError("nothing to delete: the path is not in HEAD",
                                          path=change.path)
        if os.path.lexists(on_disk):
            raise PreconditionFailedError("an untracked or ignored file is in the way",
                                          path=change.path)
        return
    if mode == TREE:
        if change.mode is None:
            raise PreconditionFailedError("a delete names a directory", path=change.path)
        out = git.run(["ls-tree", "-r", "-z", "--name-only", tree, "--", change.path]).stdout
        inside = [p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p]
        if any(p not in deleted for p in inside):
            raise PreconditionFailedError("a directory is in the way", path=change.path)
        return
    if strict and (mode == SYMLINK or on_disk.is_symlink()):
        raise PathEscapeError("a symlink is on the path; links are never written through or "
                              "replaced", path=change.path)
    if strict and mode == GITLINK:
        raise PreconditionFailedError("a submodule is in the way", path=change.path)


@contextlib.contextmanager
def scratch_objects(objects_dir: Path) -> Iterator[tuple[pygit2.Repository, dict[str, str]]]:
    """A throwaway git directory whose object directory reads the real one (``objects_dir``) as
    an alternate, opened with libgit2, and the git environment that reads the same objects: what
    is built there is never written to the repository (``predict_post_state``,
    ``dry_run_diff``).

    Raises:
        AdapterCommandError: libgit2 cannot open the scratch directory.
    """
    with tempfile.TemporaryDirectory(prefix="ratchet-git-") as scratch:
        git_dir = Path(scratch) / "scratch.git"
        (git_dir / "objects" / "info").mkdir(parents=True)
        (git_dir / "refs").mkdir()
        (git_dir / "objects" / "info" / "alternates").write_text(f"{objects_dir}\n", encoding="utf-8")
        (git_dir / "HEAD").write_text("ref: refs/heads/scratch\n", encoding="ascii")
        try:
            repo = pygit2.Repository(str(git_dir))
        except pygit2.GitError as exc:
            raise AdapterCommandError(f"libgit2 cannot open a scratch object directory: {exc}") from None
        yield repo, {"GIT_OBJECT_DIRECTORY": str(git_dir / "objects"),
                     "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects_dir)}


_MODES = {"100644": 0o100644, "100755": 0o100755, SYMLINK: 0o120000, GITLINK: 0o160000}


def build_tree(repo: pygit2.Repository, tree: str, changes: list[GitChange],
               contents: Mapping[str, bytes]) -> str:
    """Apply ``changes`` to ``tree`` and return the new tree id; the blobs and trees are written
    to ``repo``'s object database (the real one, or a scratch one from :func:`scratch_objects`).

    Args:
        tree: the parent commit's tree id (hex).
        changes: the plan's changes; each path at most once.
        contents: ``sha256 digest -> bytes`` for every change with content.

    Raises:
        AdapterCommandError: libgit2 refused an object or entry (a path git cannot hold, a
            delete of a path not in the tree).
    """
    if not changes:
        return tree
    try:
        index = pygit2.Index()
        index.read_tree(repo[tree].peel(pygit2.Tree))
        oids = {content_digest: repo.create_blob(contents[content_digest])
                for content_digest in dict.fromkeys(c.content for c in changes if c.content is not None)}
        for change in sorted(changes, key=lambda c: c.mode is not None):
            if change.mode is None:
                index.remove(change.path)
            elif change.mode == GITLINK:
                index.add(pygit2.IndexEntry(change.path, pygit2.Oid(hex=change.oid or ""), _MODES[GITLINK]))
            else:
                index.add(pygit2.IndexEntry(change.path, oids[change.content or ""], _MODES[change.mode]))
        return str(index.write_tree(repo))
    except (pygit2.GitError, KeyError, ValueError, OSError) as exc:
        raise AdapterCommandError(f"cannot build the tree: {exc}") from None


def write_commit(repo: pygit2.Repository, *, tree: str, parent: str, plan: CommitPlan,
                 message: bytes) -> str:
    """Write the commit object (exact bytes, see the module docstring) and return its id.

    With ``plan.header`` the header after the tree and parent lines is those bytes verbatim
    (identities, ``encoding``, ``gpgsig``, ``mergetag``, whatever the source held).

    Raises:
        AdapterCommandError: no author or committer, or libgit2 could not write the object.
    """
    body = f"tree {tree}\nparent {parent}\n".encode("ascii")
    if plan.header is not None:
        body += plan.header  # the source's own header lines, byte for byte
    elif plan.author is None or plan.committer is None:
        raise AdapterCommandError("a commit needs an author and a committer")
    else:
        body += (b"author " + plan.author.line() + b"\n"
                 + b"committer " + plan.committer.line() + b"\n")
        if plan.encoding is not None:
            body += f"encoding {plan.encoding}\n".encode("ascii")
    body += b"\n" + message
    # Raw bytes, not a parsed commit: libgit2 checks nothing here, as ``hash-object
    # --literally`` did not, so identities that real histories hold are kept; every field was
    # checked when the action was parsed.
    try:
        return str(repo.odb.write(pygit2.enums.ObjectType.COMMIT, body))
    except (pygit2.GitError, OSError) as exc:
        raise AdapterCommandError(f"cannot write the commit object: {exc}") from None
