"""A git repository holding every kind of history a replay must reproduce (DESIGN.md section 5.5).

``build_case_repo(path)`` builds it -- nothing is fetched -- and returns ``path``. The ``main``
branch's first-parent line, after a root commit, holds one commit per case:

* an empty commit; a message with CRLF line ends; trailing whitespace; no final newline; an
  empty message; a message ending in another run's ``Idempotency-Key`` trailer, a ``---`` line
  and ``#`` lines; a Latin-1 message and author with an ``encoding ISO-8859-1`` header;
* an executable file, a mode-only change (644 -> 755 -> 644);
* symlinks (relative, to a directory, dangling, absolute), a retargeted symlink, a file turned
  into a symlink and a symlink turned into a file;
* a gitlink (submodule entry, with ``.gitmodules``) added, moved to another commit, removed --
  the submodule's commits do not exist anywhere;
* renames, with and without an edit; a binary file; a 3 MiB file;
* unusual path names: spaces, a leading dash, tab, newline, backslash, quotes, glob and pathspec
  magic characters, non-ASCII, a deep path;
* a file turned into a directory and a directory turned into a file;
* a merge made with ``-s ours`` (changes nothing on the first-parent line), an ordinary merge
  and an octopus merge of two branches;
* authors and committers that differ, with offsets such as ``+1345``, ``-0930`` and ``-0000``;
* source trailer blocks (DESIGN.md section 5.16): ``Co-authored-by`` and a trailing
  ``Signed-off-by``, a block without a final newline, ``(cherry picked from commit ...)``, a mixed
  block that is one only by git's 25% rule, blank lines and an old ``Conflicts:`` block after a
  block, a last paragraph that is not a block;
* an author line git's own parser reads ambiguously (``Name<email> <none@none>``), a committer
  line without a date, and extra headers: ``mergetag`` and ``gpgsig`` (multi-line, kept byte for
  byte).

It is built with the product's :mod:`runtime.planners.git_history.history_builder`; raw commits
are written with ``git hash-object -t commit`` where porcelain would normalise the case away.
Everything is deterministic: the same call builds the same commit ids. Use it as
``source`` of a ``git-history`` task with ``range = "last:N"`` where ``N`` is
``first_parent_count(path) - 1`` (every commit after the root).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from runtime.planners.git_history.history_builder import history_commit, history_git, history_init, history_write

_COMMITTER = {"GIT_COMMITTER_NAME": "Grace Hopper", "GIT_COMMITTER_EMAIL": "grace@example.org"}
_FAKE_SUBMODULE_COMMITS = ("1" * 40, "2" * 40)
UNUSUAL_NAMES = (
    "with space.txt", "-leading-dash.txt", "tab\there.txt", "new\nline.txt", "back\\slash.txt",
    'quote"s.txt', "*star?[x].txt", ":(glob)magic.txt", "naïve é.md", "日本語/ファイル.txt",
    "#hash.txt", "trailing space .txt", "a/b/c/d/e/f/g/h/deep.txt",
)


ROOT_FILES = {
    "README.md": "# cases\n", "src/app.py": "print('v1')\n", "mode.sh": "#!/bin/sh\necho mode\n",
    "dir_to_file/a.txt": "a\n", "dir_to_file/b.txt": "b\n", "file_to_dir": "a file for now\n",
    "old_name.txt": "renamed later\n", "becomes_link.txt": "a file, then a link\n",
}
"""The root commit's files (path -> text), each there to be changed by a later case."""


def _dates(n: int) -> dict[str, str]:
    """Author and committer of case ``n``: different people, times and offsets."""
    return {"GIT_AUTHOR_DATE": f"{1_700_000_000 + n * 3600} +0200",
            "GIT_COMMITTER_DATE": f"{1_700_000_000 + n * 3600 + 60} -0500", **_COMMITTER}


def _git(repo: Path, *args: str, input: bytes | None = None, date: int = 0) -> str:
    return history_git(repo, "-c", "core.autocrlf=false", "-c", "core.protectNTFS=false", *args,
                       input=input, **_dates(date))


def _link(repo: Path, rel: str, target: str) -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    os.symlink(target, path)


def _commit(repo: Path, message: str | bytes, date: int) -> None:
    env = _dates(date)
    history_commit(repo, message, date=env.pop("GIT_AUTHOR_DATE"), **env)


def _raw_commit(repo: Path, message: bytes, *, author: bytes, committer: bytes,
                encoding: bytes | None = None, extra: bytes = b"") -> None:
    """Commit the staged tree with exactly these header and message bytes (``extra``: header
    lines after the encoding)."""
    _git(repo, "add", "-A")
    tree = _git(repo, "write-tree").strip()
    head = _git(repo, "rev-parse", "HEAD").strip()
    body = f"tree {tree}\nparent {head}\n".encode() + b"author " + author + b"\ncommitter " \
        + committer + b"\n" + (b"encoding " + encoding + b"\n" if encoding else b"") + extra \
        + b"\n" + message
    sha = _git(repo, "hash-object", "-t", "commit", "-w", "--stdin", input=body).strip()
    _git(repo, "update-ref", "HEAD", sha)


def _large_bytes(size: int) -> bytes:
    out, block = bytearray(), b"ratchet"
    while len(out) < size:
        block = hashlib.sha256(block).digest()
        out += block * 32
    return bytes(out[:size])


def first_parent_count(repo: Path) -> int:
    """Number of commits on ``HEAD``'s first-parent line (the root included)."""
    return int(_git(repo, "rev-list", "--first-parent", "--count", "HEAD"))


def build_case_repo(path: Path) -> Path:
    """Build the case repository at ``path`` (must not exist) and return ``path``.

    The checked-out branch is ``main``; see the module docstring for what its history holds.
    """
    repo = path
    history_init(repo)
    for rel, text in ROOT_FILES.items():
        history_write(repo, rel, text)
    _commit(repo, "Root\n", 0)

    _commit(repo, "An empty commit\n", 1)
    history_write(repo, "crlf.txt", "line\r\n")
    _commit(repo, b"Fix the thing\r\n\r\nBody with CRLF line ends\r\n", 2)
    history_write(repo, "tool.sh", "#!/bin/sh\necho tool\n", mode=0o755)
    (repo / "mode.sh").chmod(0o755)
    _commit(repo, b"Trailing whitespace   \n\nbody\t \n \n", 3)
    (repo / "mode.sh").chmod(0o644)
    _commit(repo, "Mode back to 644\n", 4)

    _link(repo, "link", "README.md")
    _link(repo, "dirlink", "src")
    _link(repo, "dangling", "nowhere/missing")
    _link(repo, "abslink", "/etc/passwd")
    _raw_commit(repo, b"Symlinks, and a message without a final newline",
                author=b"Ada Lovelace <ada@example.org> 1700010000 +1345",
                committer=b"Grace Hopper <grace@example.org> 1700010060 -0930")
    _link(repo, "link", "src/app.py")
    (repo / "becomes_link.txt").unlink()
    _link(repo, "becomes_link.txt", "README.md")
    (repo / "dangling").unlink()
    history_write(repo, "dangling", "a file again\n")
    _raw_commit(repo, b"", author=b"Ada Lovelace <ada@example.org> 1700020000 -0000",
                committer=b"Grace Hopper <grace@example.org> 1700020060 -0000")

    history_write(repo, ".gitmodules", '[submodule "vendor/lib"]\n\tpath = vendor/lib\n'
                                "\turl = https://example.invalid/lib.git\n")
    (repo / "vendor/lib").mkdir(parents=True)  # an unpopulated submodule, as a clone has it
    _git(repo, "update-index", "--add", "--cacheinfo",
         f"160000,{_FAKE_SUBMODULE_COMMITS[0]},vendor/lib")
    _commit(repo, "Add a submodule\n\nIdempotency-Key: someone-elses-key\n", 7)
    _git(repo, "update-index", "--cacheinfo", f"160000,{_FAKE_SUBMODULE_COMMITS[1]},vendor/lib")
    history_write(repo, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    _raw_commit(repo, "Caf\xe9 cr\xe8me\n\nLatin-1 body.\n".encode("latin-1"),
                author="Jos\xe9 Garc\xeda <jose@example.org> 1700030000 +0100".encode("latin-1"),
                committer=b"Grace Hopper <grace@example.org> 1700030060 +0100",
                encoding=b"ISO-8859-1")

    _git(repo, "mv", "src/app.py", "src/main.py")
    _git(repo, "mv", "old_name.txt", "new_name.txt")
    history_write(repo, "new_name.txt", "renamed and edited\n")
    _commit(repo, "Renames\n---\nnot a patch\n# not a comment\n", 9)
    history_write(repo, "assets/binary.bin", bytes(range(256)) * 64 + b"\0\xff")
    history_write(repo, "assets/large.bin", _large_bytes(3 * 1024 * 1024))
    _commit(repo, "Binary and large files\n", 10)
    for n, name in enumerate(UNUSUAL_NAMES):
        history_write(repo, name, f"unusual {n}\n")
    _commit(repo, "Unusual path names\n", 11)

    (repo / "file_to_dir").unlink()
    history_write(repo, "file_to_dir/inside.txt", "now a directory\n")
    for name in ("a.txt", "b.txt"):
        (repo / "dir_to_file" / name).unlink()
    (repo / "dir_to_file").rmdir()
    history_write(repo, "dir_to_file", "now a file\n")
    _commit(repo, "File to directory and back\n", 12)
    _git(repo, "rm", "-q", "--cached", "vendor/lib")
    (repo / "vendor/lib").rmdir()
    _commit(repo, "# Remove the submodule\n", 13)

    _git(repo, "checkout", "-q", "-b", "side")
    history_write(repo, "side.txt", "from the side branch\n")
    _commit(repo, "Side work\n", 14)
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "-s", "ours", "--no-edit", "side", date=15)
    _git(repo, "checkout", "-q", "-b", "side2")
    history_write(repo, "side2.txt", "merged for real\n")
    _commit(repo, "Side work that lands\n", 16)
    _git(repo, "checkout", "-q", "main")
    history_write(repo, "README.md", "# cases\n\nedited on main\n")
    _commit(repo, "Edit on main\n", 17)
    _git(repo, "merge", "-q", "--no-ff", "--no-edit", "side2", date=18)
    for branch in ("octo1", "octo2"):
        _git(repo, "checkout", "-q", "-b", branch, "main")
        history_write(repo, f"{branch}.txt", f"{branch}\n")
        _commit(repo, f"{branch}\n", 19)
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "--no-edit", "octo1", "octo2", date=20)

    (repo / "src/main.py").unlink()
    _commit(repo, "Delete the last file of a directory\n", 21)
    _trailer_cases(repo)
    return repo


_SIG = (b"-----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEEnotarealsignature0000000000000=\n"
        b" =AbCd\n -----END PGP SIGNATURE-----\n")
TRAILER_MESSAGES = (
    b"Add co-authors\n\nBody.\n\nCo-authored-by: Bea <bea@example.org>\n"
    b"Signed-off-by: Ada Lovelace <ada@example.org>\n",
    b"A block without a final newline\n\nReviewed-by: Cy <cy@example.org>\n"
    b"Signed-off-by: Ada Lovelace <ada@example.org>",
    b"Backport a fix\n\nBody.\n\n(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\n"
    b"Signed-off-by: Ada Lovelace <ada@example.org>\n",
    b"A mixed block\n\nsome prose in the last paragraph\nmore prose\n"
    b"Signed-off-by: Ada Lovelace <ada@example.org>\n",
    b"Not a block\n\nThe last paragraph: prose with a colon\nand no trailer at all\n",
    b"Blank lines after the block\n\nAcked-by: Dee <dee@example.org>\n\n\n",
    b"Merge with conflicts\n\nSigned-off-by: Ada Lovelace <ada@example.org>\n\nConflicts:\n\tfile.c\n",
    b"Folded\n\nCo-authored-by: Bea\n <bea@example.org>\nSigned-off-by: Ada Lovelace <ada@example.org>\n",
)
"""Messages ending (or not) in a trailer block by git's rules, one commit each."""


def build_trailer_repo(path: Path, *, rounds: int = 2) -> Path:
    """A small history of only the trailer and header cases, ``rounds`` times over after a root
    commit (``rounds * 11`` commits to replay), at ``path`` (must not exist)."""
    history_init(path)
    history_write(path, "README.md", "# trailers\n")
    _commit(path, "Root\n", 0)
    for _ in range(rounds):
        _trailer_cases(path)
    return path


def _trailer_cases(repo: Path) -> None:
    """Source trailer blocks, an ambiguous author line and extra headers (module docstring)."""
    stamp = b" 1700100000 +0000"
    for n, message in enumerate(TRAILER_MESSAGES):
        history_write(repo, "trailers.txt", f"case {n}\n")
        _raw_commit(repo, message, author=b"Ada Lovelace <ada@example.org>" + stamp,
                    committer=b"Grace Hopper <grace@example.org>" + stamp)
    history_write(repo, "trailers.txt", "ambiguous author\n")
    _raw_commit(repo, b"An author line git reads ambiguously\n\nSigned-off-by: Nobody <none@none>\n",
                author=b"Name<email> <none@none>" + stamp,
                committer=b"Grace Hopper <grace@example.org>" + stamp)
    history_write(repo, "trailers.txt", "undated committer\n")
    _raw_commit(repo, b"A committer line git cannot date\n", author=b"Ada Lovelace <ada@example.org>" + stamp,
                committer=b"Grace Hopper <grace@example.org>")
    history_write(repo, "trailers.txt", "extra headers\n")
    _raw_commit(repo, b"Merge tag 'v1.0'\n\nSigned-off-by: Ada Lovelace <ada@example.org>\n",
                author=b"Ada Lovelace <ada@example.org>" + stamp,
                committer=b"Grace Hopper <grace@example.org>" + stamp,
                extra=b"mergetag object 0123456789abcdef0123456789abcdef01234567\n type commit\n"
                      b" tag v1.0\n tagger Ada Lovelace <ada@example.org> 1700100000 +0000\n \n"
                      b" v1.0\n" + b"gpgsig " + _SIG)
