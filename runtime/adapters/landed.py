"""Adapter-neutral types for what a receipt's write left in its environment (DESIGN.md section 6.6).

Each adapter that can read its writes back answers in these types (:class:`FileRead`,
:class:`LandedFile`, :class:`LandedEffect`); :mod:`runtime.adapters.readback` picks the reader by
adapter kind. Framework-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

FileState = Literal["bytes", "absent", "too_large", "unreadable"]


@dataclass(frozen=True)
class FileRead:
    """One side of one file as an adapter read it.

    Attributes:
        state: ``bytes`` (``data`` holds the whole file), ``absent``, ``too_large`` (``size`` is
            over the reader's ``max_bytes``; nothing was read) or ``unreadable`` (``note`` says why).
        data: the file's bytes, only with ``bytes``.
        size: the file's size in bytes, where known.
        digest: an identifier of the content where no bytes were read (git: ``git:<blob id>``).
        note: why the file could not be read, only with ``unreadable``.
    """

    state: FileState
    data: bytes = b""
    size: int = 0
    digest: str = ""
    note: str = ""


ABSENT = FileRead("absent")


@dataclass(frozen=True)
class LandedFile:
    """One path of a landed write: how the write left it (``op``, in words such as ``added``,
    ``modified``, ``unchanged`` or ``on disk now``), its content after the write (``landed``)
    and before it (``before``: the environment's content the write started from, where the
    adapter can still read it, else None)."""

    path: str
    op: str
    landed: FileRead
    before: FileRead | None = None


@dataclass
class LandedEffect:
    """What one receipt's write left, as far as its adapter can read it back.

    Attributes:
        message: the write's own description, where the environment keeps one (git: the commit
            message without Ratchet's trailers), else None.
        files: the planned paths and the paths the write touched, in path order, at most
            ``max_files`` of them; ``files_left_out`` counts the rest.
        error: why the write could not be read back (the repository is gone, the commit was
            rewritten away), or ``""``; ``files`` is then empty.
    """

    message: str | None = None
    files: list[LandedFile] = field(default_factory=list)
    files_left_out: int = 0
    error: str = ""
