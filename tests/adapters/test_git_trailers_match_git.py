"""Story: the git adapter's one trailer reader reads a commit message exactly as git does, and
the receipt lines it adds are read by git as the message's own trailers followed by Ratchet's
(DESIGN.md section 5.16). Every answer is checked against the real ``git interpret-trailers``:
named cases (cherry-picked lines, ``Signed-off-by`` last, with and without a final newline,
``(cherry picked from commit ...)``, a last paragraph that is not a block, mixed blocks that pass
or fail git's 25% rule, continuation lines, comments, an old ``Conflicts:`` block, a scissors
line) and a few hundred seeded random messages built from the same pieces.
"""

from __future__ import annotations

import random

import pytest

from runtime.adapters.git.receipts import message_with_trailers, original_message, receipt_fits
from runtime.adapters.git.trailers import trailer_block, trailers_add, trailers_of
from tests.helpers.replay_fidelity import git

NAMED = [
    b"Title\n\nBody.\n\nCo-authored-by: B <b@example.org>\nSigned-off-by: A <a@example.org>\n",
    b"Title\n\nSigned-off-by: A <a@example.org>",
    b"Title\n\n(cherry picked from commit 0123456789abcdef0123456789abcdef01234567)\n",
    b"Title\n\nBody.\n\n(cherry picked from commit 0123456789abcdef)\nSigned-off-by: A <a@x>\n",
    b"Title\n\nThe last paragraph: prose\nand more prose\n",
    b"Title\n\nprose\nmore prose\nSigned-off-by: A <a@x>\n",            # 1 of 3 trailers: a block
    b"Title\n\nprose\nmore\nthird\nfourth\nSigned-off-by: A <a@x>\n",    # 1 of 5: no block
    b"Title\n\nprose\nmore\nthird\nFixes: 1\n",                           # no git prefix: no block
    b"Title\n\nCo-authored-by: B\n  <b@example.org>\nAcked-by: C\n",      # a continuation line
    b"Title\n\nAcked-by: C\n# a comment\n",
    b"Title\n\nAcked-by: C\n\n\n",
    b"Title\n\nSigned-off-by: A <a@x>\n\nConflicts:\n\tfile.c\n",
    b"Title\n\nSigned-off-by: A <a@x>\n# ------------------------ >8 ------------------------\nX: y\n",
    b"Signed-off-by: A <a@x>\n",                                           # a title, not a block
    b"Title\r\n\r\nSigned-off-by: A <a@x>\r\n",
    b"Title\n\nKey : spaced\nBad Key: x\n",
    b"Title\n\nFoo: bar\n  \n",
    b"",
    b"\n\nTitle\n\nFoo: bar\n",
    b"Title\n\nSigned-off-by: A\nIdempotency-Key: someone-elses\n",
]
_PIECES = [b"Title", b"Body text", b"Signed-off-by: A <a@b>", b"Co-authored-by: B <b@c>",
           b"(cherry picked from commit 1234abcd)", b"Foo: bar", b"  continued", b"\tcont",
           b"# comment", b"", b"   ", b"Conflicts:", b"\tfile.c", b"---", b"Not a trailer",
           b"Key : spaced", b"Bad Key: x", b":colon", b"x:", b"Fixes: #12", b"\r", b"Acked-by: C\r",
           b"# ------------------------ >8 ------------------------", b"\x0b"]
_OURS = [b"Idempotency-Key: k-1", b"Intent-Digest: sha256:00", b"Fencing-Token: 3",
         b"Committed-At: 1700000000"]


def _random_messages(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        message = b"\n".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 9)))
        out.append(message + b"\n" if rng.random() < 0.7 else message)
    return out


def _as_commit(message: bytes) -> bytes:
    """What ``git log`` parses: the message from its first non-blank line (and no divider)."""
    while True:
        line = message[: message.find(b"\n") + 1] if b"\n" in message else message
        if not line or line.strip(b" \t\r\n"):
            return message
        message = message[len(line):]


def _git_trailers(message: bytes) -> list[str]:
    out = git(None, "interpret-trailers", "--parse", "--no-divider", input=_as_commit(message))
    return out.decode("utf-8", "replace").splitlines()


def _ours(message: bytes) -> list[str]:
    return [f"{token}: {value}" for token, value in trailers_of(message)]


MESSAGES = NAMED + _random_messages(250, seed=28)


def test_the_reader_reads_every_message_as_git_does() -> None:
    wrong = [m for m in MESSAGES if _ours(m) != _git_trailers(m)]

    assert wrong == []


def test_added_lines_are_read_by_git_after_the_messages_own_trailers() -> None:
    lines = [line.decode() for line in _OURS]
    checked = 0
    for message in MESSAGES:
        joined = trailers_add(message, _OURS)
        if joined is None:
            continue
        checked += 1
        block = trailer_block(message)
        expected = (_git_trailers(message) if block.present else []) + lines
        assert _git_trailers(joined) == expected, message
        assert joined.startswith(message[:block.start])
    assert checked > len(MESSAGES) // 2


@pytest.mark.parametrize("message", NAMED)
def test_a_receipt_message_is_the_source_around_the_receipt(message: bytes) -> None:
    full = message_with_trailers(message, idempotency_key="k-1", intent_digest="sha256:00",
                                 fencing_token=3, approval_digest=None, committed_at=1)
    ours = ["Idempotency-Key: k-1", "Intent-Digest: sha256:00", "Fencing-Token: 3",
            "Committed-At: 1"]
    forged = any(line.lower().startswith("idempotency-key") for line in _git_trailers(message))

    got = _git_trailers(full)

    assert got == ([] if forged else _git_trailers(message)) + ours
    back = original_message(full)
    assert back == message or (back == message + b"\n" and not message.endswith(b"\n"))
    last = message.split(b"\n")[-2].strip() if message.endswith(b"\n") else b""
    if last and trailer_block(message).end == len(message):
        text = "".join(line + "\n" for line in ours).encode()
        assert full in (message + text, message + b"\n" + text)  # never an extra blank line


def test_a_message_opening_with_a_scissors_line_is_refused() -> None:
    """git reads nothing after a scissors line, so no receipt could be read back."""
    assert not receipt_fits(b"# ------------------------ >8 ------------------------\nTitle\n")
    assert receipt_fits(b"Title\n# ------------------------ >8 ------------------------\n")
