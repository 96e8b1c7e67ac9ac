"""A loopback listener that counts who connected: proof that a refused request never left."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loopback_listener() -> Iterator[socket.socket]:
    """A non-blocking listener on a free 127.0.0.1 port, closed afterwards."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    try:
        yield listener
    finally:
        listener.close()


def connections(listener: socket.socket) -> int:
    """How many connections are waiting on ``listener`` (each is accepted and closed)."""
    count = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1
