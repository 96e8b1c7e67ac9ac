"""A nesting-depth limit for everything Ratchet decodes from outside (DESIGN.md section 2.2).

Parsers and validators of nested data (``json``, ``tomllib``, pydantic, the canonical encoder)
walk it recursively, so a file nested a few hundred levels deep ends in a bare
``RecursionError`` somewhere, at a depth that depends on how deep the caller's stack already
is. Every decoder of outside input (checkpoint envelopes, task specs, evidence bundles) instead
refuses anything nested deeper than :data:`MAX_NESTING_DEPTH` with a typed error, and the
checkpoint writer refuses to seal such a state, so nothing signed is ever unreadable.

The checks never recurse: :func:`json_text_depth` scans the raw text before any parser sees it
(strings are cut out first, so brackets inside a string do not count; a few C-speed byte passes,
about a third of what ``json.loads`` of the same bytes costs) and :func:`value_depth`
walks a parsed value with an explicit stack. Framework-free: nothing here imports Django.
"""

from __future__ import annotations

import json
from itertools import accumulate
from typing import Any

from runtime.errors import NestingTooDeepError

MAX_NESTING_DEPTH = 64
"""Deepest nesting of arrays and objects Ratchet reads or writes (the outermost container is
level 1). A checkpoint's own structure uses about 8 levels; the rest is room for action params
and receipt results."""

EMBEDDING_NESTING_DEPTH = 2 * MAX_NESTING_DEPTH
"""Limit for documents that embed checkpoint content a few levels down (an evidence bundle holds
review cases holding pending actions holding params), so a bundle of any checkpoint Ratchet
could seal is still read."""

_BRACKETS = b"[]{}"
_NOT_BRACKETS = bytes(b for b in range(256) if b not in _BRACKETS)
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_text_depth(text: str | bytes | bytearray | memoryview) -> int:
    """The deepest nesting of ``[``/``{`` in JSON text, strings excluded, without parsing it.

    For text that is not JSON the figure may be off (a stray backslash outside a string), which
    is fine: the parser refuses such text at that point anyway, and :func:`json_loads_bounded`
    still turns a ``RecursionError`` into the typed refusal.

    Args:
        text: JSON text, as ``str`` or UTF-8 bytes.

    Returns:
        0 for a scalar document, 1 for ``[]`` or ``{}``, and so on.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    # C-speed passes only. Escaped backslashes go first, then escaped quotes, so every quote
    # left delimits a string; the even pieces between quotes are outside strings. Keep their
    # bracket bytes and take the running sum's maximum.
    unescaped = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(unescaped.split(b'"')[::2]).translate(None, _NOT_BRACKETS)
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets)), default=0))


def value_depth(value: Any, *, limit: int = MAX_NESTING_DEPTH) -> int:
    """The nesting depth of a parsed value (dicts, lists and tuples), walked without recursion.

    Stops early once ``limit`` is passed, so a hostile value costs no more than the levels that
    are allowed.

    Args:
        value: a parsed JSON/TOML value.
        limit: stop counting beyond this depth (the result is then ``limit + 1``).

    Returns:
        0 for a scalar, 1 for a flat list or dict, and so on (at most ``limit + 1``).
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return deepest


def nesting_check(depth: int, *, what: str, limit: int = MAX_NESTING_DEPTH) -> None:
    """Refuse a depth over ``limit``.

    Args:
        depth: from :func:`json_text_depth` or :func:`value_depth`.
        what: what was measured, for the message (``"checkpoint JSON"``, ``"task spec"``).
        limit: the allowed depth (default :data:`MAX_NESTING_DEPTH`).

    Raises:
        NestingTooDeepError: ``depth > limit`` (DESIGN.md section 2.2).
    """
    if depth > limit:
        raise NestingTooDeepError(f"{what} nests more than {limit} levels deep", limit=limit)


def json_loads_bounded(text: str | bytes | bytearray | memoryview, *, what: str = "JSON",
                       limit: int = MAX_NESTING_DEPTH, **loads_kwargs: Any) -> Any:
    """``json.loads`` for outside input: refuses nesting deeper than ``limit`` before parsing.

    Drop-in for ``json.loads(text)`` in a decoder that already turns ``ValueError`` into its own
    typed error: :class:`NestingTooDeepError` is a ``ValueError`` and a ``RatchetError``.

    Args:
        text: the JSON text (``str`` or UTF-8 bytes).
        what: what is parsed, for the message.
        limit: the allowed depth (default :data:`MAX_NESTING_DEPTH`).
        loads_kwargs: passed to ``json.loads`` (``object_pairs_hook``...).

    Raises:
        NestingTooDeepError: nested deeper than ``limit`` (DESIGN.md section 2.2).
        ValueError / UnicodeDecodeError: not JSON, as ``json.loads`` raises them.
    """
    nesting_check(json_text_depth(text), what=what, limit=limit)
    try:
        return json.loads(text if isinstance(text, str | bytes) else bytes(text), **loads_kwargs)
    except RecursionError:
        # Only reachable when the caller's own stack is nearly exhausted; still a typed refusal.
        raise NestingTooDeepError(f"{what} nests too deeply to parse here", limit=limit) from None
