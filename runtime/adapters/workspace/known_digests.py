"""Content digests of workspace files remembered by what ``stat`` says of them (DESIGN.md section 5.5).

An observation hashes every file of the workspace, and a write observes it two or three times,
so a run over a large workspace would read every byte of it several times per write. A digest
is therefore remembered per file (device and inode) together with the file's size, modification
and change times and mode, and reused while all four are unchanged. A file's change time
(``st_ctime``) moves with every change of its content or metadata and cannot be set by a
program (unlike the modification time), so an out-of-band edit always changes what is
compared -- except within one tick of the filesystem's clock, where two writes of the same size
can leave the same times. As git does with "racily clean" entries, a digest is remembered only
for a file whose change and modification times lie more than :data:`SETTLED_NS` before the
moment its bytes were read: a later write then necessarily carries a later time. Per process;
imports nothing from Django.
"""

from __future__ import annotations

import os

SETTLED_NS = 1_000_000_000
"""A file changed less than this long (nanoseconds) before it was read is hashed again next time."""

MAX_REMEMBERED = 65_536
"""Files remembered per process; past it the memory starts over (a bound, not a cache policy)."""

_Signature = tuple[int, int, int, int]

_KNOWN: dict[tuple[int, int], tuple[_Signature, str]] = {}


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def known_digest(st: os.stat_result) -> str | None:
    """The remembered sha256 hex of the regular file ``st`` describes (an ``lstat`` or
    ``fstat`` result taken now), or None when it is not remembered or may have changed."""
    known = _KNOWN.get((st.st_dev, st.st_ino))
    if known is None or known[0] != _signature(st):
        return None
    return known[1]


def digest_remember(st: os.stat_result, sha256: str, *, read_at_ns: int) -> None:
    """Remember ``sha256`` for the file ``st`` describes.

    Args:
        st: the ``fstat`` of the open file the digest was read from, taken before reading.
        sha256: the hex digest of its bytes.
        read_at_ns: ``time.time_ns()`` just before the bytes were read; a file changed within
            :data:`SETTLED_NS` of it is not remembered (see the module docstring).
    """
    if max(st.st_ctime_ns, st.st_mtime_ns) > read_at_ns - SETTLED_NS:
        return
    if len(_KNOWN) >= MAX_REMEMBERED:
        _KNOWN.clear()
    _KNOWN[(st.st_dev, st.st_ino)] = (_signature(st), sha256)
