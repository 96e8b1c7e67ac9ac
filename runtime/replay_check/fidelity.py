"""Does each replayed commit read, in git, as its source commit (DESIGN.md section 5.16)?

Read with plain ``git`` only (``cat-file --batch`` and ``log --format=%(trailers:only,unfold)``),
never through the adapter's own trailer reader, for every pair of source and target commit:

* the header after the tree and parent lines (author, committer, encoding, mergetag, gpgsig,
  anything else) is the source's, byte for byte;
* the message is the source's bytes around Ratchet's receipt lines, which either joined the
  source's trailer block or form a paragraph after exactly one blank line;
* git's trailer parse is the source's trailers followed by Ratchet's (only Ratchet's when the
  source's block already held a Ratchet trailer name, which the adapter never joins).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runtime.errors import GitReplayError
from runtime.replay_check.repository import git, git_env

_RATCHET = ("idempotency-key", "intent-digest", "fencing-token", "approval-digest", "committed-at")
_OURS = re.compile(rb"^Idempotency-Key: [^\n]*\nIntent-Digest: [^\n]*\nFencing-Token: [^\n]*\n"
                   rb"(?:Approval-Digest: [^\n]*\n)?(?:Committed-At: [^\n]*\n)?", re.MULTILINE)
_BLANK_TITLE = b"\n\n(empty commit message)\n\n"


@dataclass(frozen=True)
class Fidelity:
    """How many replayed commits differ from their source, and the first of each kind."""

    compared: int
    headers: list[str]
    messages: list[str]
    trailers: list[str]

    @property
    def passed(self) -> bool:
        return not (self.headers or self.messages or self.trailers)

    def detail(self) -> str:
        parts = [f"{len(found)} {what}, first at {found[0][:12]}"
                 for what, found in (("headers differ", self.headers),
                                     ("messages differ", self.messages),
                                     ("trailer parses differ", self.trailers)) if found]
        return "; ".join(parts) or f"all {self.compared} read as their source"


def _raw_commits(repo: Path, shas: Sequence[str]) -> list[bytes]:
    proc = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], capture_output=True,
                          input="".join(f"{s}\n" for s in shas).encode(), env=git_env(), check=False)
    if proc.returncode != 0:
        raise GitReplayError("git cat-file failed", repository=str(repo))
    out, pos, found = proc.stdout, 0, []
    for _ in shas:
        newline = out.index(b"\n", pos)
        size = int(out[pos:newline].split(b" ")[2])
        found.append(out[newline + 1:newline + 1 + size])
        pos = newline + 1 + size + 1
    return found


def _split(raw: bytes) -> tuple[bytes, bytes]:
    at = raw.find(b"\n\n")
    header, message = (raw, b"") if at < 0 else (raw[:at + 1], raw[at + 2:])
    lines = header.split(b"\n")
    rest = 1
    while rest < len(lines) and lines[rest].startswith(b"parent "):
        rest += 1
    return b"\n".join(lines[rest:]), message


def _trailers(repo: Path, revs: str) -> list[list[str]]:
    out = git(repo, "log", "--first-parent", "--reverse", "--format=%x1e%(trailers:only,unfold)", revs)
    return [[line for line in record.splitlines() if line] for record in out.split("\x1e")[1:]]


def around_receipt(source: bytes, before: bytes, after: bytes) -> bool:
    """Whether ``before`` + receipt lines + ``after`` is ``source`` with the receipt added as the
    adapter adds it (joined, or a paragraph after one blank line; the ignorable tail after)."""
    if before + after == source:
        return not before.endswith(b"\n\n")
    if before[:-1] + after == source and before[:-1].endswith(b"\n"):
        return True
    if not after and not source.endswith(b"\n") and before in (source + b"\n", source + b"\n\n"):
        return True
    return before.endswith(_BLANK_TITLE) and not after and before[: -len(_BLANK_TITLE)] == source


def fidelity_check(*, source: Path, base: str, tip: str, target: Path,
                   targets: Sequence[str]) -> Fidelity:
    """Compare the first-parent commits after ``base`` up to ``tip`` in ``source`` with
    ``targets`` (the target's, oldest first), pairwise as far as both go.

    Raises:
        GitReplayError: git failed.
    """
    sources = git(source, "rev-list", "--first-parent", "--reverse", f"{base}..{tip}").split()
    pairs = list(zip(sources, targets, strict=False))
    source_raw = _raw_commits(source, [s for s, _ in pairs])
    target_raw = _raw_commits(target, [t for _, t in pairs])
    source_trailers = _trailers(source, f"{base}..{tip}")
    target_trailers = _trailers(target, f"{base}..HEAD")
    result = Fidelity(compared=len(pairs), headers=[], messages=[], trailers=[])
    for i, (sha, _) in enumerate(pairs):
        header, message = _split(source_raw[i])
        replayed_header, replayed = _split(target_raw[i])
        if header != replayed_header:
            result.headers.append(sha)
        found = list(_OURS.finditer(replayed))
        if not found or not around_receipt(message, replayed[:found[-1].start()],
                                           replayed[found[-1].end():]):
            result.messages.append(sha)
            continue
        ours = found[-1].group(0).decode("utf-8", "replace").splitlines()
        own = source_trailers[i]
        kept = [] if any(t.split(":")[0].lower() in _RATCHET for t in own) else own
        if i >= len(target_trailers) or target_trailers[i] != kept + ours:
            result.trailers.append(sha)
    return result
