"""UPDATE statements of the commit path, compiled by the ORM once per shape (DESIGN.md section 4.3).

Every checkpoint advance runs the same two UPDATEs (the run-row fence and the HWM
compare-and-set) with other values. Building them through the query API costs more CPU than
the database spends executing them, so :func:`compiled_update` compiles a statement once per
process and shape with *probe* values (one distinct sentinel per varying value), records which
parameter position holds which value, and from then on only fills the parameters in.

The ORM stays the only author of the SQL: the cached text is exactly what ``QuerySet.update``
would run. On first use the real call is compiled too and compared with the filled template;
if they differ (a probe value the compiler transformed or inlined), the shape is never cached
and every call goes through the ORM, so a wrong parameter order cannot be executed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.db.models.sql import UpdateQuery

UpdateBuilder = Callable[[Mapping[str, Any]], tuple[QuerySet[Any], dict[str, Any]]]
"""``values -> (queryset, update kwargs)``: the statement written with the query API."""

_UNCACHEABLE = object()
_PROBE_INT = 2_000_000_000
"""Probe integers (``_PROBE_INT + i``) stay inside a 32-bit column's range, so an integer
lookup is compiled the same way as for a real value."""

_TEMPLATES: dict[tuple[Any, ...], Any] = {}
"""``(alias, shape, slot names and types)`` -> ``(sql, plan)`` or ``_UNCACHEABLE``; a plan entry is
``("const", value)`` or ``("slot", name, the driver's wrapper type)``."""


def _compile(queryset: QuerySet[Any], values: dict[str, Any]) -> tuple[str, list[Any]]:
    queryset._for_write = True  # noqa: SLF001 - as QuerySet.update: the write alias
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.clear_select_clause()
    sql, params = query.get_compiler(queryset.db).as_sql()
    return sql, list(params)


def _probe(index: int, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return _PROBE_INT + index if isinstance(value, int) else f"ratchet-probe-{index}-slot"


def _template(build: UpdateBuilder, slots: Mapping[str, Any]) -> Any:
    probes = {name: _probe(i, value) for i, (name, value) in enumerate(slots.items())}
    if any(p is None for p in probes.values()):
        return _UNCACHEABLE
    by_probe = {(type(p), p): name for name, p in probes.items()}
    sql, params = _compile(*build(probes))
    if any(str(p) in sql for p in probes.values()):
        return _UNCACHEABLE  # a value was inlined into the text: not a parameter
    plan: list[tuple[Any, ...]] = []
    for param in params:
        # A driver may wrap a value in a subclass of its type (psycopg's Int8): kept, refilled.
        base = int if isinstance(param, int) and not isinstance(param, bool) else type(param)
        name = by_probe.get((base, param)) if base in (int, str) else None
        plan.append(("const", param) if name is None else ("slot", name, type(param)))
    real_sql, real_params = _compile(*build(slots))
    if real_sql != sql or not _same(real_params, _fill(plan, slots)):
        return _UNCACHEABLE
    return sql, plan


def _same(left: list[Any], right: list[Any]) -> bool:
    return len(left) == len(right) and all(
        type(a) is type(b) and a == b for a, b in zip(left, right, strict=True))


def _fill(plan: list[tuple[Any, ...]], slots: Mapping[str, Any]) -> list[Any]:
    return [p[1] if p[0] == "const" else (slots[p[1]] if p[2] in (int, str) else p[2](slots[p[1]]))
            for p in plan]


def compiled_update(*, alias: str, shape: tuple[Any, ...], build: UpdateBuilder,
                    slots: Mapping[str, Any]) -> int:
    """Run the UPDATE ``build(slots)`` describes on ``alias``; return the rows it changed.

    Args:
        alias: the database alias the queryset uses.
        shape: what fixes the statement's text besides ``slots`` (the same shape with other
            slot values must compile to the same SQL): e.g. a name and a lease duration.
        build: writes the statement with the query API from a slot mapping.
        slots: the varying values (``str`` or ``int``), by name, in a stable order.

    Raises:
        DatabaseError: as ``QuerySet.update`` would.
    """
    # The slots' types are part of the key: a None (``IS NULL``) compiles to other text.
    key = (alias, shape, tuple((name, type(value)) for name, value in slots.items()))
    template = _TEMPLATES.get(key)
    if template is None:
        template = _TEMPLATES[key] = _template(build, slots)
    if template is _UNCACHEABLE:
        queryset, values = build(slots)
        return queryset.update(**values)
    sql, plan = template
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, _fill(plan, slots))
        return cursor.rowcount
