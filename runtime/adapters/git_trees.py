"""Building a write's tree and commit object without touching the index or the working tree.

The new tree is built in a scratch index (``GIT_INDEX_FILE``): ``read-tree`` the parent's tree,
all blobs in one ``hash-object -w --stdin-paths`` call, ``update-index -z --index-info`` with one
record per change (regular file, executable, symlink, gitlink or delete), ``write-tree``. The
commit object is written with ``hash-object -t commit``, so the message, identities, dates and
``encoding`` header are exactly the planned bytes (``commit-tree`` would re-wrap identities
and could not keep an explicit encoding header). Objects are written before the ref moves;
until then they are unreferenced garbage, never state (DESIGN.md section 5). Imports nothing
from Django.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import pygit2

from runtime.adapters.git_commit_params import GITLINK, SYMLINK, CommitPlan, GitChange
from runtime.adapters.git_process import GitProcess
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
def scratch_objects(objects_dir: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A scratch directory, and the git environment of a throwaway object directory that
    reads the real one (``objects_dir``) as an alternate: building there writes nothing to the
    repository (``predict_post_state``, ``dry_run_diff``)."""
    with tempfile.TemporaryDirectory(prefix="ratchet-git-") as scratch:
        objects = Path(scratch) / "objects"
        objects.mkdir()
        yield Path(scratch), {"GIT_OBJECT_DIRECTORY": str(objects),
                              "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects_dir)}


def build_tree(git: GitProcess, tree: str, changes: list[GitChange],
               contents: Mapping[str, bytes], *, scratch: Path,
               env: Mapping[str, str] | None = None) -> str:
    """Apply ``changes`` to ``tree`` in a scratch index and return the new tree id.

    Args:
        contents: ``sha256 digest -> bytes`` for every change with content.
        scratch: an empty private directory for the index and blob files.
        env: extra git environment (a scratch object directory for predictions).
    """
    if not changes:
        return tree
    full_env = {"GIT_INDEX_FILE": str(scratch / "index"), **(env or {})}
    digests = list(dict.fromkeys(c.content for c in changes if c.content is not None))
    oids: dict[str, str] = {}
    if digests:
        files = []
        for n, content_digest in enumerate(digests):
            path = scratch / f"blob-{n}"
            path.write_bytes(contents[content_digest])
            files.append(str(path))
        out = git.run(["hash-object", "-w", "--no-filters", "--stdin-paths"],
                      input="".join(f + "\n" for f in files).encode(), env=full_env).stdout
        written = out.decode("ascii").split()
        if len(written) != len(digests):
            raise AdapterCommandError("git hash-object answered an unexpected number of ids")
        oids = dict(zip(digests, written, strict=True))
    git.run(["read-tree", tree], env=full_env)
    zero = "0" * len(tree)
    records = []
    for change in changes:
        if change.mode is None:
            records.append(f"0 {zero}\t{change.path}")
        elif change.mode == GITLINK:
            records.append(f"{GITLINK} {change.oid}\t{change.path}")
        else:
            records.append(f"{change.mode} {oids[change.content or '']}\t{change.path}")
    payload = "".join(r + "\0" for r in records).encode("utf-8")
    git.run(["update-index", "-z", "--index-info"], input=payload, env=full_env)
    return git.text(["write-tree"], env=full_env)


def write_commit(git: GitProcess, *, tree: str, parent: str, plan: CommitPlan,
                 message: bytes) -> str:
    """Write the commit object (exact bytes, see the module docstring) and return its id."""
    if plan.author is None or plan.committer is None:
        raise AdapterCommandError("a commit needs an author and a committer")
    body = (f"tree {tree}\nparent {parent}\n".encode("ascii")
            + b"author " + plan.author.line() + b"\n"
            + b"committer " + plan.committer.line() + b"\n")
    if plan.encoding is not None:
        body += f"encoding {plan.encoding}\n".encode("ascii")
    body += b"\n" + message
    # --literally: newer git versions fsck objects here and would refuse identities that real
    # histories hold; every field was checked when the action was parsed.
    return git.text(["hash-object", "-t", "commit", "-w", "--literally", "--stdin"], input=body)
