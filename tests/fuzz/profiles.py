"""Hypothesis settings shared by the fuzz and property tests (DESIGN.md section 7).

``QUICK`` runs in every CI pass (few examples, a couple of seconds per test); ``THOROUGH`` is the
same property with many examples, for tests marked ``@pytest.mark.slow``. No example database
is written (``database=None``): the repository stays clean and a failure prints its own
reproduction (``@reproduce_failure``) instead.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

_COMMON = {
    "deadline": None,  # a slow shared machine must not turn into a flaky failure
    "database": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                              HealthCheck.data_too_large, HealthCheck.filter_too_much],
}

QUICK = settings(max_examples=40, **_COMMON)
THOROUGH = settings(max_examples=1500, **_COMMON)

JSON_LEAVES = (st.none() | st.booleans() | st.integers(min_value=-(2**60), max_value=2**60)
               | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40))
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
"""Arbitrary JSON values (NaN and infinities included: ``json.loads`` accepts them)."""


def deep(depth: int, *, kind: str = "list") -> str:
    """JSON text nested ``depth`` levels deep: ``[[[...]]]`` or ``{"a":{"a":...1}}``."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a JSON value (the root is ``()``), for "replace one value" mutations."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += json_paths(item, (*prefix, index))
    return out


def json_replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of ``value`` with the item at ``path`` replaced by ``new``."""
    if not path:
        return new
    copy = json.loads(json.dumps(value))
    node = copy
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = new
    return copy
