"""The slow disk's FUSE server: a passthrough of one directory that can be made slow on demand
(DESIGN.md section 8.8).

``python -m runtime.chaos.fuse_passthrough BACKING MOUNTPOINT --control FILE --seed N`` mounts
``BACKING`` at ``MOUNTPOINT`` through libfuse (the ``mfusepy`` binding of Debian's ``libfuse3``)
and serves it in the foreground until SIGTERM, when libfuse leaves its loop and unmounts. While
``FILE`` exists, every read, write, fsync and metadata change that reaches the server first
sleeps a delay drawn from ``random.Random(N)`` in ``--delay-ms LOW,HIGH`` (default 20-200 ms):
the disk is slow, not broken, so nothing fails, everything takes longer (a lease may expire
under its holder, which is what the fault is for). Locks are left to the kernel (no ``lock``
operation), which is right for processes on one host.

This module imports neither Django nor the runtime: the server starts in a fraction of a second
and nothing it does can touch the runs' stores except through the files it serves.
"""

from __future__ import annotations

import argparse
import errno
import functools
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import mfusepy

DELAY_MS = (20.0, 200.0)
"""Default per-operation delay while the disk is slow, drawn uniformly (milliseconds)."""

_F = TypeVar("_F", bound=Callable[..., Any])


def _slowed(method: _F) -> _F:
    """Sleep the drawn delay first while the control file exists."""
    @functools.wraps(method)
    def wrapper(self: SlowPassthrough, *args: Any) -> Any:
        self.pause()
        return method(self, *args)

    return wrapper  # type: ignore[return-value]


class SlowPassthrough(mfusepy.Operations):
    """Every operation on ``backing``; the I/O ones slowed while ``control`` exists.

    Args:
        backing: the directory served (absolute).
        control: the file whose existence turns the delays on (outside the mount).
        seed: seeds the delays.
        delay_ms: ``(low, high)`` milliseconds.
    """

    use_ns = True

    def __init__(self, *, backing: Path, control: Path, seed: int, delay_ms: tuple[float, float]) -> None:
        self.backing = backing
        self.control = control
        self.delay_ms = delay_ms
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.served = False

    def init(self, path: str) -> None:
        self.served = True

    def pause(self) -> None:
        if not os.path.exists(self.control):
            return
        with self._lock:  # one seeded sequence of draws, whichever thread asks
            seconds = self._rng.uniform(*self.delay_ms) / 1000.0
        time.sleep(seconds)

    def _real(self, path: str) -> str:
        return os.path.join(self.backing, path.lstrip("/"))

    # --- attributes and directories (not slowed: the page cache answers most of these) ---------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino", "st_dev", "st_blocks",
                "st_blksize", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")
        attrs = {key: getattr(st, key) for key in keys}
        for key in ("st_atime", "st_mtime", "st_ctime"):
            attrs[key] = attrs.pop(f"{key}_ns")
        return attrs

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                                  "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid, follow_symlinks=False)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        os.utime(self._real(path), ns=times, follow_symlinks=False) if times else os.utime(self._real(path))
        return 0

    # --- what a disk does: slowed ----------------------------------------------------------------

    @_slowed
    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    @_slowed
    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    @_slowed
    def unlink(self, path: str) -> int:
        os.unlink(self._real(path))
        return 0

    @_slowed
    def rename(self, old: str, new: str) -> int:
        os.rename(self._real(old), self._real(new))
        return 0

    @_slowed
    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._real(target))
        return 0

    @_slowed
    def link(self, target: str, source: str) -> int:
        os.link(self._real(source), self._real(target))
        return 0

    @_slowed
    def mknod(self, path: str, mode: int, dev: int) -> int:
        os.mknod(self._real(path), mode, dev)
        return 0

    def open(self, path: str, flags: int) -> int:
        return os.open(self._real(path), flags)

    @_slowed
    def create(self, path: str, mode: int, flags: int) -> int:
        return os.open(self._real(path), flags | os.O_CREAT, mode)

    @_slowed
    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    @_slowed
    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return os.pwrite(fh, data, offset)

    @_slowed
    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            os.ftruncate(fh, length)
        else:
            os.truncate(self._real(path), length)
        return 0

    @_slowed
    def fsync(self, path: str, datasync: int, fh: int) -> int:
        os.fdatasync(fh) if datasync else os.fsync(fh)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0


def main(argv: list[str] | None = None) -> None:
    """Mount and serve until SIGTERM (see the module docstring for the arguments)."""
    parser = argparse.ArgumentParser(prog="fuse_passthrough", description=__doc__.splitlines()[0])
    parser.add_argument("backing")
    parser.add_argument("mountpoint")
    parser.add_argument("--control", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--delay-ms", default=f"{DELAY_MS[0]:g},{DELAY_MS[1]:g}")
    args = parser.parse_args(argv)
    low, high = (float(part) for part in args.delay_ms.split(","))
    operations = SlowPassthrough(backing=Path(args.backing).resolve(), control=Path(args.control).resolve(),
                                 seed=args.seed, delay_ms=(low, high))
    try:
        mfusepy.FUSE(operations, args.mountpoint, foreground=True, fsname="ratchet-slow-disk")
    except RuntimeError as exc:
        # libfuse reports a loop ended by SIGTERM as an error (its code 8) after it unmounted:
        # that is the ordinary way this server stops.
        if not operations.served or os.path.ismount(args.mountpoint):
            raise
        print(f"fuse_passthrough: stopped and unmounted ({exc})", file=sys.stderr)


if __name__ == "__main__":
    main()
