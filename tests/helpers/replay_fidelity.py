"""Checks that a replayed commit is its source commit, as git itself reads both (DESIGN.md
section 5.16): the header after the tree and parents byte for byte, the message bytes around the
receipt lines the source's, and git's trailer parse the source's trailers followed by Ratchet's.

Everything is read with plain git (``cat-file``, ``log --format=%(trailers)``, ``interpret-trailers
--parse``), never with the adapter's own reader.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

RATCHET = ("idempotency-key", "intent-digest", "fencing-token", "approval-digest", "committed-at")
_OURS = re.compile(rb"^Idempotency-Key: [^\n]*\nIntent-Digest: [^\n]*\nFencing-Token: [^\n]*\n"
                   rb"(?:Approval-Digest: [^\n]*\n)?Committed-At: [^\n]*\n", re.MULTILINE)
_BLANK_TITLE = b"\n\n(empty commit message)\n\n"


def git(repo: Path | None, *args: str, input: bytes | None = None) -> bytes:
    """``git [-C repo] args`` with no user or system config; stdout bytes."""
    cmd = ["git", *(["-C", str(repo)] if repo else []), *args]
    return subprocess.run(cmd, input=input, capture_output=True, check=True,
                          env={"PATH": os.environ.get("PATH", os.defpath), "HOME": os.devnull,
                               "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}).stdout


def _split(raw: bytes) -> tuple[bytes, bytes]:
    """(header lines after tree and parents, message) of a raw commit object."""
    at = raw.find(b"\n\n")
    header, message = (raw, b"") if at < 0 else (raw[:at + 1], raw[at + 2:])
    lines = header.split(b"\n")
    rest = 1
    while lines[rest].startswith(b"parent "):
        rest += 1
    return b"\n".join(lines[rest:]), message


def _log_trailers(repo: Path, sha: str) -> list[str]:
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)", sha).decode("utf-8", "replace")
    return [line for line in out.splitlines() if line]


def parse_trailers(message: bytes) -> list[str]:
    """``git interpret-trailers --parse`` of ``message``, one ``Token: value`` per item."""
    return [line for line in git(None, "interpret-trailers", "--parse", input=message)
            .decode("utf-8", "replace").splitlines() if line]


def message_around_receipt(source: bytes, before: bytes, after: bytes) -> bool:
    """Whether ``before`` + receipt lines + ``after`` is ``source`` with the receipt added as the
    adapter may add it: joined to the source's block, or a paragraph after exactly one blank
    line (one newline more after a final newline, two without one), the ignorable tail after."""
    if before + after == source:
        return not before.endswith(b"\n\n")  # joined to a block
    if before[:-1] + after == source and before[:-1].endswith(b"\n"):
        return True  # a paragraph after a message (or its part before the tail) ending in \n
    if not after and not source.endswith(b"\n"):
        if before == source + b"\n":
            return True  # joined, the source had no final newline
        if before == source + b"\n\n":
            return True  # a paragraph, the source had no final newline
    return before.endswith(_BLANK_TITLE) and not after and before[: -len(_BLANK_TITLE)] == source


def check_replayed(source: Path, source_sha: str, target: Path, target_sha: str) -> list[str]:
    """Every way the target commit differs from the source commit; ``[]`` when faithful."""
    problems = []
    source_header, source_message = _split(git(source, "cat-file", "commit", source_sha))
    header, message = _split(git(target, "cat-file", "commit", target_sha))
    if header != source_header:
        problems.append(f"header differs: {source_header!r:.200} -> {header!r:.200}")
    found = list(_OURS.finditer(message))
    if not found:
        return [*problems, "no receipt lines"]
    before, ours, after = message[:found[-1].start()], found[-1].group(0), message[found[-1].end():]
    if not message_around_receipt(source_message, before, after):
        problems.append(f"message bytes differ: {source_message!r:.200} -> {message!r:.300}")
    own = [line.decode() for line in ours.splitlines()]
    source_trailers = _log_trailers(source, source_sha)
    forged = any(t.split(":")[0].lower() in RATCHET for t in source_trailers)
    if _log_trailers(target, target_sha) != ([] if forged else source_trailers) + own:
        problems.append(f"git log trailers: {source_trailers} -> {_log_trailers(target, target_sha)}")
    # interpret-trailers reads a message as a mail: a "---" line starts a patch, and leading
    # blank lines are not skipped; git log (above) reads a commit. Compare where the two agree.
    if not source_message.startswith((b"\n", b" ", b"\t", b"\r")) and b"\n---" not in source_message:
        expected = ([] if forged else parse_trailers(source_message)) + own
        if parse_trailers(message) != expected:
            problems.append(f"interpret-trailers: {parse_trailers(source_message)} -> "
                            f"{parse_trailers(message)}")
    return problems


def check_replay(source: Path, base: str, tip: str, target: Path) -> dict[str, list[str]]:
    """:func:`check_replayed` for every first-parent commit after ``base`` up to ``tip`` against
    the target's first-parent line after ``base`` (the same count expected); problems by source
    commit id."""
    sources = git(source, "rev-list", "--first-parent", "--reverse", f"{base}..{tip}").split()
    targets = git(target, "rev-list", "--first-parent", "--reverse", f"{base}..HEAD").split()
    if len(sources) != len(targets):
        return {"count": [f"{len(sources)} source commits, {len(targets)} replayed"]}
    found = {}
    for s, t in zip(sources, targets, strict=True):
        problems = check_replayed(source, s.decode(), target, t.decode())
        if problems:
            found[s.decode()] = problems
    return found
