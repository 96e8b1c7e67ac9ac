"""git's trailer rules for a commit message: where its trailer block is and what it holds.

This is the one trailer reader of the git adapter (DESIGN.md section 5.16): the receipt written
into a commit, the key index and the receipt parser all go through it, so what Ratchet reads is
what git reads. The rules are git's own (``trailer.c`` and ``commit.c`` of git 2.39, checked
against the real ``git interpret-trailers`` and ``git log --format=%(trailers)`` by the tests),
applied the way git reads a *commit*: leading blank lines are skipped (``git log`` parses from
the subject on) and there is no ``---`` patch divider (``--no-divider``; a commit message is not
a mail). With git's default configuration (comment character ``#``, separator ``:``):

* the *trailer end* is the message length minus its ignorable tail: trailing empty and ``#``
  lines, an old-style ``Conflicts:`` block, and everything from a scissors line
  (``# ------------------------ >8 ------------------------``) on;
* the first paragraph is the title and never holds trailers;
* scanning up from the trailer end to the first blank line, the lines above form the block when
  they are all trailers (``Token: value``, continuation lines folded in), or when one of them
  starts with a git-generated prefix (``Signed-off-by: ``, ``(cherry picked from commit ``) and
  at least a quarter of them are trailers;
* a trailer's token is the text before the first ``:`` (letters, digits, ``-``, then optional
  blanks); its value is the rest, continuation lines unfolded, blanks trimmed.

Bytes, not text: git's character classes are ASCII-only, so any ASCII-compatible encoding reads
the same. Imports nothing from Django.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_SPACE = frozenset(b" \t\n\r")
"""git's ``isspace`` (its own ctype table: no vertical tab or form feed)."""
_COMMENT = ord("#")
_SCISSORS = b"# ------------------------ >8 ------------------------\n"
_GIT_PREFIXES = (b"Signed-off-by: ", b"(cherry picked from commit ")
_CONFLICTS = b"Conflicts:\n"


@dataclass(frozen=True)
class TrailerBlock:
    """Where a message's trailer block is, and its trailers.

    Attributes:
        start, end: byte offsets of the block in the message (``start == end``: no block); ``end``
            is git's trailer end, so ``message[end:]`` is the ignorable tail.
        trailers: ``(token, value)`` pairs in order, as ``git interpret-trailers --parse`` prints
            them (non-trailer lines of a mixed block left out, continuations unfolded).
    """

    start: int
    end: int
    trailers: tuple[tuple[str, str], ...]

    @property
    def present(self) -> bool:
        return self.start < self.end


def _isalnum(c: int) -> bool:
    return 48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122


def _line_end(buf: bytes, at: int) -> int:
    """Offset just past the line starting at ``at`` (its newline included)."""
    nl = buf.find(b"\n", at)
    return len(buf) if nl < 0 else nl + 1


def _is_blank(buf: bytes, at: int) -> bool:
    while at < len(buf) and buf[at] != 10 and buf[at] in _SPACE:
        at += 1
    return at >= len(buf) or buf[at] == 10


def _separator(buf: bytes, at: int) -> int:
    """Offset of the ``:`` of a ``Token: value`` line starting at ``at``, relative to ``at``; -1
    when the line is not shaped like a trailer (git's ``find_separator``)."""
    blank_seen = False
    c = at
    while c < len(buf):
        ch = buf[c]
        if ch == 58:  # ":"
            return c - at
        if not blank_seen and (_isalnum(ch) or ch == 45):
            c += 1
            continue
        if c != at and ch in (32, 9):
            blank_seen = True
            c += 1
            continue
        break
    return -1


def _skip_blank_lines(buf: bytes) -> int:
    at = 0
    while at < len(buf):
        end = _line_end(buf, at)
        if any(ch not in _SPACE for ch in buf[at:end]):
            break
        at = end
    return at


def _trailer_end(buf: bytes) -> int:
    """git's ``ignore_non_trailer``: the end of the message without its ignorable tail."""
    if buf.startswith(_SCISSORS):
        cutoff = 0
    else:
        found = buf.find(b"\n" + _SCISSORS)
        cutoff = len(buf) if found < 0 else found + 1
    boc, bol, in_conflicts = 0, 0, False
    while bol < cutoff:
        nxt = _line_end(buf, bol)
        if buf[bol] in (_COMMENT, 10):
            if not boc:
                boc = bol
        elif buf.startswith(_CONFLICTS, bol):
            in_conflicts = True
            if not boc:
                boc = bol
        elif in_conflicts and buf[bol] == 9:
            pass
        elif boc:
            boc, in_conflicts = 0, False
        bol = nxt
    # As in git, a run of ignorable lines starting at offset 0 does not count (boc 0 is "none").
    return boc if boc else cutoff


def _last_line(buf: bytes, end: int) -> int:
    if end == 0:
        return -1
    if end == 1:
        return 0
    nl = buf.rfind(b"\n", 0, end - 1)
    return nl + 1


def _trailer_start(buf: bytes, end: int) -> int:
    """git's ``find_trailer_start`` over ``buf[:end]``; ``end`` when there is no block."""
    s = 0
    while s < end:
        if buf[s] != _COMMENT and _is_blank(buf, s):
            break
        s = _line_end(buf, s)
    end_of_title = s
    only_spaces, recognized = True, False
    trailer_lines = non_trailer_lines = continuation = 0
    bol = _last_line(buf, end)
    while bol >= end_of_title:
        if bol < len(buf) and buf[bol] == _COMMENT:
            non_trailer_lines += continuation
            continuation = 0
        elif _is_blank(buf, bol):
            if not only_spaces:
                non_trailer_lines += continuation
                if (recognized and trailer_lines * 3 >= non_trailer_lines) or (
                        trailer_lines and not non_trailer_lines):
                    return _line_end(buf, bol)
                return end
        else:
            only_spaces = False
            if buf.startswith(_GIT_PREFIXES, bol):
                trailer_lines += 1
                continuation = 0
                recognized = True
            elif _separator(buf, bol) >= 1:
                trailer_lines += 1
                continuation = 0
            elif buf[bol] in _SPACE:
                continuation += 1
            else:
                non_trailer_lines += 1 + continuation
                continuation = 0
        bol = _last_line(buf, bol)
    return end


def _trim(raw: bytes) -> bytes:
    start, stop = 0, len(raw)
    while start < stop and raw[start] in _SPACE:
        start += 1
    while stop > start and raw[stop - 1] in _SPACE:
        stop -= 1
    return raw[start:stop]


def _unfold(value: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(value):
        ch = value[i]
        i += 1
        if ch == 10:
            while i < len(value) and value[i] in _SPACE:
                i += 1
            out.append(32)
        else:
            out.append(ch)
    return _trim(bytes(out))


def _parse(block: bytes) -> tuple[tuple[str, str], ...]:
    items: list[bytearray] = []
    last_is_trailer = False
    for line in _split_nl(block):
        if last_is_trailer and line[0] in _SPACE:
            items[-1] += line
            continue
        items.append(bytearray(line))
        last_is_trailer = _separator(line, 0) >= 1
    found = []
    for item in items:
        raw = bytes(item)
        if raw[:1] == b"#":
            continue
        sep = _separator(raw, 0)
        if sep >= 1:
            token = _trim(raw[:sep]).decode("utf-8", "replace")
            value = _unfold(_trim(raw[sep + 1:])).decode("utf-8", "replace")
            found.append((token, value))
    return tuple(found)


def _split_nl(block: bytes) -> list[bytes]:
    """Lines split at ``\\n`` only (``splitlines`` would split at a lone CR too)."""
    lines, at = [], 0
    while at < len(block):
        end = _line_end(block, at)
        lines.append(block[at:end])
        at = end
    return lines


def trailer_block(message: bytes) -> TrailerBlock:
    """The trailer block of a commit message as git reads it (see the module docstring).

    Args:
        message: the raw message bytes (after the header's blank line).

    Returns:
        A :class:`TrailerBlock` with offsets into ``message``.
    """
    skip = _skip_blank_lines(message)
    body = message[skip:]
    end = _trailer_end(body)
    start = _trailer_start(body, end)
    return TrailerBlock(start=skip + start, end=skip + end, trailers=_parse(body[start:end]))


def trailers_of(message: bytes) -> tuple[tuple[str, str], ...]:
    """``(token, value)`` pairs of ``message``'s trailer block, in order (none: ``()``)."""
    return trailer_block(message).trailers


def _last_content_line_end(message: bytes, start: int, end: int) -> int:
    """Offset just past the last line of ``message[start:end]`` that is not blank."""
    at, last = start, start
    while at < end:
        nxt = _line_end(message, at)
        if not _is_blank(message, at):
            last = nxt
        at = nxt
    return last


def trailers_add(message: bytes, lines: Sequence[bytes], *, join: bool = True) -> bytes | None:
    """``message`` with the trailer ``lines`` added the way git adds a trailer, or None when git
    would not read them back as the last trailers of the message.

    With ``join`` and a trailer block present, the lines go right after its last non-blank line
    (the block keeps its trailers and gains these); otherwise they form a new last paragraph at
    the trailer end, after one blank line -- a message ending in a newline gets one newline more,
    one without gets two. The ignorable tail (trailing blank and ``#`` lines, a ``Conflicts:``
    block, a scissors line and what follows it) stays after them, byte for byte (should git
    then not read them, they go at the very end instead). The result is
    read back with :func:`trailer_block` and returned only when its trailers are the message's
    own (joined) or none (a paragraph) followed by exactly ``lines``.

    Args:
        message: the raw message bytes.
        lines: ``b"Token: value"`` lines without newlines.
        join: False puts the lines in a paragraph of their own even after a trailer block.
    """
    text = b"".join(line + b"\n" for line in lines)
    wanted = _parse(text)
    block = trailer_block(message)
    if join and block.present:
        at = _last_content_line_end(message, block.start, block.end)
        head = message[:at] if message[:at].endswith(b"\n") else message[:at] + b"\n"
        out = head + text + message[at:]
        if trailers_of(out) == block.trailers + wanted:
            return out
        return None
    for at in (block.end, len(message)):
        # At the trailer end, as git puts a trailer; at the very end when an odd tail (an old
        # "Conflicts:" block opening the message) would swallow them there.
        head = message[:at]
        sep = b"\n" if head.endswith(b"\n") else b"\n\n"
        out = head + sep + text + message[at:]
        if trailers_of(out) == wanted:
            return out
    return None
