"""The per-environment lock adapters hold around every read and write (DESIGN.md section 4).

Imports nothing from Django.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

from runtime.errors import AdapterBusyError


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str], *, timeout: float, target: str) -> Iterator[int]:
    """Hold an exclusive ``flock`` on ``path`` (created 0644 if missing) for the ``with`` block.

    Two processes acting on one environment never interleave. Closing the descriptor releases
    the lock, and the kernel releases it when the holder is SIGKILLed, so a crash never leaves
    the environment locked. Yields the locked descriptor: a child process that inherits it
    (``subprocess`` ``pass_fds``) keeps the lock held until the child exits too, so a child
    orphaned by a killed holder still excludes the next holder.

    Args:
        path: the lock file.
        timeout: seconds to wait for the lock.
        target: the environment's path, for the error.

    Raises:
        AdapterBusyError: the lock was not free within ``timeout`` seconds (retryable).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise AdapterBusyError(target=target, waited_seconds=timeout) from None
                time.sleep(0.005)
        yield fd
    finally:
        os.close(fd)
