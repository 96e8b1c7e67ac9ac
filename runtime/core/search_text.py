"""What the dashboard's content search can find in a proposed write (DESIGN.md section 6.8).

A write's searchable content is cut into short, normalised *terms* when its intent is recorded:
the idempotency key, the action's kind and target, a commit's message (its first line whole, and
each word of it) and the paths it changes (whole, and the file name). A search then compares the
start of each term with what the user typed, which an ordinary b-tree index answers at any size.
Framework-free: imports nothing from Django.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

TERM_CHARS = 200
"""A term is cut to this many characters (the column's width)."""
MESSAGE_WORDS = 24
"""At most this many distinct words of one commit message become terms."""
PATHS = 50
"""At most this many changed paths of one write become terms."""
MIN_WORD_CHARS = 2

KEY, ACTION, TARGET, MESSAGE, WORD, PATH = "key", "action", "target", "message", "word", "path"
"""Term kinds: what part of the write a term came from."""

_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+")
INTENT_EVENT = "intent.proposed"
"""The trace event whose payload carries the write's content (``runtime.engine.propose``)."""


def search_normalize(text: str) -> str:
    """``text`` as terms and queries are compared: case-folded, NUL-free, runs of white space as
    one space, trimmed, at most ``TERM_CHARS`` characters."""
    return _SPACE.sub(" ", text.replace("\x00", " ").casefold()).strip()[:TERM_CHARS]


def search_words(text: str) -> list[str]:
    """The distinct words of ``text`` in order (runs of letters and digits: ``retry_budget.py``
    is ``retry``, ``budget``, ``py``), case-folded, at least ``MIN_WORD_CHARS`` long, at most
    ``MESSAGE_WORDS``."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text.casefold()):
        word = match.group(0)[:TERM_CHARS]
        if len(word) >= MIN_WORD_CHARS:
            seen.setdefault(word, None)
        if len(seen) >= MESSAGE_WORDS:
            break
    return list(seen)


def _text(value: Any) -> str:
    """A byte-valued git field (plain text, or ``{"base64": ...}``) as text; other values: ``""``."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(value["base64"], validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            return ""
    return ""


PATH_DEPTH = 8
"""A path is a term from each of its last this many directory boundaries on."""


def _path_terms(path: str) -> list[tuple[str, str]]:
    """``a/b/c.py`` -> ``a/b/c.py``, ``b/c.py``, ``c.py``: a path is found by its start from any
    directory boundary, so ``bench/pages`` finds ``runtime/bench/pages.py``."""
    parts = path.strip("/").split("/")
    tails = ["/".join(parts[i:]) for i in range(max(0, len(parts) - PATH_DEPTH), len(parts))]
    return [(PATH, search_normalize(t)) for t in dict.fromkeys([path, *tails])]


def intent_terms(payload: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``(kind, term)`` pairs of one ``intent.proposed`` payload (``{"idempotency_key",
    "action": {"kind", "target", "params"}, ...}``), without duplicates; malformed or missing
    fields give no term (the payload was validated when the write was proposed)."""
    terms: list[tuple[str, str]] = []
    key = payload.get("idempotency_key")
    if isinstance(key, str):
        terms.append((KEY, search_normalize(key)))
    action = payload.get("action")
    if not isinstance(action, Mapping):
        return _distinct(terms)
    if isinstance(action.get("kind"), str):
        terms.append((ACTION, search_normalize(action["kind"])))
    target = action.get("target")
    if isinstance(target, str) and target:
        is_path = "/" in target and "://" not in target
        terms.extend(_path_terms(target) if is_path else [(TARGET, search_normalize(target))])
    params = action.get("params")
    if not isinstance(params, Mapping):
        return _distinct(terms)
    message = _text(params.get("message"))
    if message:
        first_line = message.strip().split("\n", 1)[0]
        terms.append((MESSAGE, search_normalize(first_line)))
        terms.extend((WORD, word) for word in search_words(message))
    changes = params.get("changes")
    if isinstance(changes, list):
        for change in changes[:PATHS]:
            if isinstance(change, Mapping) and isinstance(change.get("path"), str):
                terms.extend(_path_terms(change["path"]))
    return _distinct(terms)


def events_terms(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, str]]:
    """The terms of every ``intent.proposed`` among ``events`` (``(event_type, payload)`` pairs)
    worth storing: without the ones another of them covers (:func:`terms_covered`)."""
    terms: list[tuple[str, str]] = []
    for event_type, payload in events:
        if event_type == INTENT_EVENT:
            terms.extend(intent_terms(payload))
    terms = _distinct(terms)
    covered = terms_covered([term for _, term in terms])
    kept: set[str] = set()
    out = []
    for kind, term in terms:
        if term not in covered and term not in kept:
            kept.add(term)
            out.append((kind, term))
    return out


def terms_covered(terms: Iterable[str]) -> set[str]:
    """The terms of one run that another of its terms starts with (``"fix"`` beside ``"fix the
    lease renewal"``, ``"src"`` beside ``"src/app.py"``).

    A search matches a run when one of its terms starts with what was typed (DESIGN.md section
    6.8), and whatever a covered term starts with, the longer term starts with too, so the run is
    found without it: storing it costs a row and finds nothing more. Two terms with the same text
    (of different kinds) are one: the search does not read the kind.
    """
    ordered = sorted(set(terms))  # code-point order: a term sits right before the ones it starts
    return {a for a, b in zip(ordered, ordered[1:], strict=False) if b.startswith(a)}


def _distinct(terms: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [t for t in dict.fromkeys(terms) if t[1]]
