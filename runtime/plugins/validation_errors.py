"""Pydantic validation errors rendered as one message naming every bad field by its TOML path.

``policy.budgets.steps: Input should be greater than or equal to 0`` rather than pydantic's
tuple locations, so an operator can fix a task file without reading Python. Framework-free:
nothing here imports Django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from pydantic import ValidationError

_BARE_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _render_loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            continue  # pydantic's marker for "the dict key itself"; the message says which
        elif _BARE_KEY_RE.match(part):
            out += ("." if out else "") + part
        else:
            out += "[" + json.dumps(part, ensure_ascii=False) + "]"  # a table key like "a/b.md"
    return out


def error_lines(exc: ValidationError, *, prefix: tuple[str, ...] = ()) -> list[str]:
    """One ``"<toml.path>: <message>"`` line per error of ``exc``.

    Args:
        exc: the pydantic error.
        prefix: the TOML path of the table the validated model sits at: a plug-in's options
            model validates ``[planner]`` without knowing it is there, so its errors get
            ``("planner",)`` in front.
    """
    lines: list[str] = []
    for err in exc.errors(include_url=False, include_input=False):
        loc = (*prefix, *err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (not part of the task spec)"
        where = _render_loc(tuple(loc))
        lines.append(f"{where}: {msg}" if where else msg)
    return lines


def render_lines(source: str, lines: Sequence[str]) -> str:
    """``"<source> is invalid:"`` and one ``"  - <line>"`` per line."""
    return f"{source} is invalid:\n  - " + "\n  - ".join(lines)


def render_validation_error(source: str, exc: ValidationError) -> str:
    """``"<source> is invalid:"`` and one ``"  - <toml.path>: <message>"`` line per error."""
    return render_lines(source, error_lines(exc))
