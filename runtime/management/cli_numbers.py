"""Numeric command-line options that refuse nonsense while the arguments are parsed (DESIGN.md section 7).

argparse's ``type=int`` and ``type=float`` take ``-1``, ``0``, ``nan``, ``inf`` and ``1e999``,
so ``resume --wait nan`` or ``run --max-steps -1`` used to start and do something undefined
(a ``nan`` wait compares false with every deadline; a negative step limit stops at once). The
commands use these parsers instead: a bad value is an ``argparse.ArgumentTypeError``, so argparse
prints ``usage: ...`` and ``argument --wait: ...`` and the process exits 2 (the usage code of
``runtime.decisions.verdicts``) before anything is opened or written.

Each factory returns the ``type=`` callable for one option::

    parser.add_argument("--max-steps", type=count(minimum=1))
    parser.add_argument("--wait", type=seconds(allow_zero=True))
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def count(*, minimum: int = 1, maximum: int | None = None) -> Callable[[str], int]:
    """A whole-number option between ``minimum`` and ``maximum`` (inclusive; None: no upper bound).

    Returns:
        The ``type=`` callable; it raises ``argparse.ArgumentTypeError`` for text that is not a
        whole number (``1.5``, ``nan``, ``inf``) or a number out of range.
    """

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number; got {text!r:.40}") from None
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"at least {minimum}" if maximum is None else f"between {minimum} and {maximum}"
            raise argparse.ArgumentTypeError(f"must be a whole number {bound}; got {value}")
        return value

    return parse


def _finite(text: str, what: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}; got {text!r:.40}") from None
    if not math.isfinite(value):  # nan, inf, -inf and overflowing literals such as 1e999
        raise argparse.ArgumentTypeError(f"{what}; got {text!r:.40}, which is not finite")
    return value


def seconds(*, allow_zero: bool, name: str = "") -> Callable[[str], float]:
    """A duration in seconds: finite, never negative, and above zero unless ``allow_zero``.

    Args:
        allow_zero: whether ``0`` is a meaningful value (``--wait 0``: do not wait).
        name: what the duration is, for the message (``"approval validity"``).

    Returns:
        The ``type=`` callable; it raises ``argparse.ArgumentTypeError`` for ``nan``, ``inf``, a
        negative duration, or ``0`` when zero is not allowed.
    """
    bound = "0 or more" if allow_zero else "more than 0"
    what = f"{name + ' ' if name else ''}must be a finite number of seconds, {bound}"

    def parse(text: str) -> float:
        value = _finite(text, what)
        if value < 0 or (value == 0 and not allow_zero):
            raise argparse.ArgumentTypeError(f"{what}; got {text.strip()!r:.40}")
        return value

    return parse


def fraction(text: str) -> float:
    """The ``type=`` callable for a share between 0 and 1 inclusive (finite).

    Raises:
        argparse.ArgumentTypeError: not a number, not finite, or outside 0..1.
    """
    what = "must be a finite share between 0 and 1"
    value = _finite(text, what)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{what}; got {text.strip()!r:.40}")
    return value


def port(text: str) -> int:
    """The ``type=`` callable for a TCP port to listen on (1-65535).

    Raises:
        argparse.ArgumentTypeError: not a whole number, or outside 1..65535.
    """
    return count(minimum=1, maximum=65535)(text)
