"""Statements of the commit and restore paths, compiled by the ORM once per shape (DESIGN.md
section 4.3).

Every checkpoint advance runs the same few statements (the run-row fence, the HWM
compare-and-set, the ledger, checkpoint and trace INSERTs; with a separate HWM database also the
fenced lock and the orphan DELETE) with other values, and every restore the same SELECTs.
Building them through the query API costs more CPU than the database spends executing them, so
:func:`compiled_update`, :func:`compiled_delete` and :func:`compiled_rows` compile a statement
once per process and shape with *probe* values (one distinct sentinel per varying value), record
which parameter position holds which value, and from then on only fill the parameters in;
:func:`compiled_insert` caches the INSERT text per model and row count and prepares each value
with its field, as ``bulk_create`` does.

The ORM stays the only author of the SQL: the cached text is exactly what the query API would
run. On first use the real call is compiled too and compared with the filled template; if they
differ (a probe value the compiler transformed or inlined, an expression with parameters of its
own), the shape is never cached and every call goes through the ORM, so a wrong parameter order
cannot be executed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.db import connections
from django.db.models import AutoField, Model, QuerySet
from django.db.models.constants import OnConflict
from django.db.models.sql import DeleteQuery, InsertQuery, UpdateQuery

UpdateBuilder = Callable[[Mapping[str, Any]], tuple[QuerySet[Any], dict[str, Any]]]
"""``values -> (queryset, update kwargs)``: the statement written with the query API."""

_UNCACHEABLE = object()
_PROBE_INT = 2_000_000_000
"""Probe integers (``_PROBE_INT + i``) stay inside a 32-bit column's range, so an integer
lookup is compiled the same way as for a real value."""

_TEMPLATES: dict[tuple[Any, ...], Any] = {}
"""``(alias, shape, slot names and types)`` -> ``(sql, plan)`` or ``_UNCACHEABLE``; a plan entry is
``("const", value)`` or ``("slot", name, the driver's wrapper type)``."""


class NotBatchableError(Exception):
    """A statement of a batch (``runtime.database.pipeline``) has no cached text and would go
    through the query API, which may open a transaction of its own (``bulk_create``, a cascading
    ``delete``): the batch must roll back and run statement by statement. Internal to the
    commit path; never reaches a caller of the commit."""


def _batching(alias: str) -> bool:
    raw = connections[alias].connection
    pgconn = getattr(raw, "pgconn", None)
    return bool(pgconn is not None and pgconn.pipeline_status)


def _compile(queryset: QuerySet[Any], values: dict[str, Any] | None) -> tuple[str, list[Any]]:
    """The SQL of ``queryset.update(**values)``; with ``values`` None, of its fast DELETE (as
    ``QuerySet._raw_delete``, what ``delete()`` runs when nothing cascades or listens)."""
    queryset._for_write = True  # noqa: SLF001 - as QuerySet.update/delete: the write alias
    if values is None:
        query = queryset.query.clone()
        query.__class__ = DeleteQuery
    else:
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(values)
        query.clear_select_clause()
    sql, params = query.get_compiler(queryset.db).as_sql()
    return sql, list(params)


def _compile_select(queryset: QuerySet[Any], _values: None) -> tuple[str, list[Any]]:
    sql, params = queryset.query.get_compiler(queryset.db).as_sql()
    return sql, list(params)


def _probe(index: int, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return _PROBE_INT + index if isinstance(value, int) else f"ratchet-probe-{index}-slot"


def _template(build: UpdateBuilder, slots: Mapping[str, Any],
              compile_: Callable[..., tuple[str, list[Any]]] = _compile) -> Any:
    probes = {name: _probe(i, value) for i, (name, value) in enumerate(slots.items())}
    if any(p is None for p in probes.values()):
        return _UNCACHEABLE
    by_probe = {(type(p), p): name for name, p in probes.items()}
    sql, params = compile_(*build(probes))
    if any(str(p) in sql for p in probes.values()):
        return _UNCACHEABLE  # a value was inlined into the text: not a parameter
    plan: list[tuple[Any, ...]] = []
    for param in params:
        # A driver may wrap a value in a subclass of its type (psycopg's Int8): kept, refilled.
        base = int if isinstance(param, int) and not isinstance(param, bool) else type(param)
        name = by_probe.get((base, param)) if base in (int, str) else None
        plan.append(("const", param) if name is None else ("slot", name, type(param)))
    real_sql, real_params = compile_(*build(slots))
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
    key = _update_key(alias, shape, slots)
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


def _update_key(alias: str, shape: tuple[Any, ...], slots: Mapping[str, Any]) -> tuple[Any, ...]:
    # The slots' types are part of the key: a None (``IS NULL``) compiles to other text.
    return (alias, shape, tuple((name, type(value)) for name, value in slots.items()))


def compiled_update_cached(*, alias: str, shape: tuple[Any, ...], slots: Mapping[str, Any]) -> bool:
    """Whether :func:`compiled_update_sent` can send this UPDATE: an earlier
    :func:`compiled_update` of the same shape and slot types compiled and checked it."""
    template = _TEMPLATES.get(_update_key(alias, shape, slots))
    return template is not None and template is not _UNCACHEABLE


def compiled_update_sent(*, alias: str, shape: tuple[Any, ...],
                         slots: Mapping[str, Any]) -> Any | None:
    """Send the UPDATE :func:`compiled_update` cached for ``shape`` and these slot types, and
    return its open cursor without reading its result; None when nothing is cached yet (the
    first call of a shape goes through :func:`compiled_update`, which checks it).

    For a batch of statements sent together (``runtime.database.pipeline``): the caller reads
    ``cursor.rowcount`` after the batch's results came back, then closes the cursor.

    Raises:
        DatabaseError: as ``QuerySet.update`` would (in a batch: when its results come back).
    """
    template = _TEMPLATES.get(_update_key(alias, shape, slots))
    if template is None or template is _UNCACHEABLE:
        return None
    sql, plan = template
    cursor = connections[alias].cursor()
    try:
        cursor.execute(sql, _fill(plan, slots))
    except BaseException:
        cursor.close()
        raise
    return cursor


def compiled_delete(*, alias: str, shape: tuple[Any, ...],
                    build: Callable[[Mapping[str, Any]], QuerySet[Any]],
                    slots: Mapping[str, Any]) -> int:
    """Run the DELETE of the queryset ``build(slots)`` (no cascades, no signals: only for models
    nothing references and nobody listens to); return the rows it deleted.

    Args: as :func:`compiled_update`, ``build`` returning only the queryset.

    Raises:
        DatabaseError: as ``QuerySet.delete`` would.
    """
    key = ("delete", alias, shape, tuple((name, type(value)) for name, value in slots.items()))
    template = _TEMPLATES.get(key)
    if template is None:
        template = _TEMPLATES[key] = _template(lambda s: (build(s), None), slots)
    if template is _UNCACHEABLE:
        if _batching(alias):
            raise NotBatchableError(shape)
        deleted, _ = build(slots).delete()
        return deleted
    sql, plan = template
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, _fill(plan, slots))
        return cursor.rowcount


def compiled_rows(*, alias: str, shape: tuple[Any, ...],
                  build: Callable[[Mapping[str, Any]], QuerySet[Any]],
                  slots: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The rows of the ``values_list`` queryset ``build(slots)``, with the same conversions from
    database values the ORM applies (dates, JSON, booleans).

    Args: as :func:`compiled_update`, ``build`` returning a ``values_list`` queryset.

    Raises:
        DatabaseError: as evaluating the queryset would.
    """
    key = ("rows", alias, shape, tuple((name, type(value)) for name, value in slots.items()))
    template = _TEMPLATES.get(key)
    if template is None:
        template = _TEMPLATES[key] = _select_template(build, slots)
    if template is _UNCACHEABLE:
        return list(build(slots))
    sql, plan, compiler, converters = template
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, _fill(plan, slots))
        rows = cursor.fetchall()
    if converters:
        return [tuple(row) for row in compiler.apply_converters(rows, converters)]
    return [tuple(row) for row in rows]


def _select_template(build: Callable[[Mapping[str, Any]], QuerySet[Any]],
                     slots: Mapping[str, Any]) -> Any:
    template = _template(lambda s: (build(s), None), slots, _compile_select)
    if template is _UNCACHEABLE:
        return _UNCACHEABLE
    queryset = build(slots)
    compiler = queryset.query.get_compiler(queryset.db)
    compiler.setup_query()
    # Only a values_list of plain columns, in the order asked: a row is then exactly what the
    # driver returns, converted as ``results_iter`` converts it.
    if [alias for _col, _sql, alias in compiler.select] != list(queryset._fields or ()):  # noqa: SLF001
        return _UNCACHEABLE
    converters = compiler.get_converters([col for col, _sql, _alias in compiler.select])
    return (*template, compiler, converters)


_MAX_CACHED_ROWS = 32
"""Multi-row INSERTs of more rows than this go through ``bulk_create`` (it batches them)."""


def _param_equal(left: Any, right: Any) -> bool:
    # psycopg's JSON wrapper has no equality of its own: compare what it wraps.
    return type(left) is type(right) and getattr(left, "obj", left) == getattr(right, "obj", right)


def compiled_insert(*, alias: str, objs: list[Model], ignore_conflicts: bool = False,
                    keep_cursor: bool = False) -> Any | None:
    """Insert ``objs`` (unsaved instances of one model, primary keys left to the database) in one
    statement, as ``bulk_create(objs, ignore_conflicts=...)`` would; the instances' primary keys
    are not set.

    The statement's text is compiled by the ORM once per model, row count and which fields hold
    database-side expressions (``db_default``); each value is then prepared by its field
    (``pre_save`` + ``get_db_prep_save``, what the insert compiler does). PostgreSQL's compiler
    inserts several rows through ``UNNEST`` with one array per column; the cached statement is
    then refilled column by column. On first use the compiler's own parameters are compared with
    these; any difference, or more than :data:`_MAX_CACHED_ROWS` rows, sends the call through
    ``bulk_create``.

    Args:
        keep_cursor: return the statement's open cursor (the caller reads ``rowcount``, e.g.
            after a batch's results came back, and closes it); None when the call went through
            ``bulk_create``.

    Raises:
        IntegrityError: a unique constraint failed (without ``ignore_conflicts``).
        DatabaseError: as ``bulk_create`` would.
    """
    if not objs:
        return None
    model = type(objs[0])
    connection = connections[alias]
    fields = _INSERT_FIELDS.get(model)
    if fields is None:
        fields = _INSERT_FIELDS[model] = [
            f for f in model._meta.concrete_fields
            if not f.generated and not isinstance(f, AutoField)]
    values = [[f.pre_save(obj, True) for f in fields] for obj in objs]
    shape = tuple(tuple(hasattr(v, "resolve_expression") for v in row) for row in values)
    key = ("insert", alias, model, ignore_conflicts, shape)
    template = _TEMPLATES.get(key)
    if template is None and len(objs) <= _MAX_CACHED_ROWS:
        template = _TEMPLATES[key] = _insert_template(
            model, fields, objs, values, alias=alias, ignore_conflicts=ignore_conflicts)
    if template is None or template is _UNCACHEABLE:
        if _batching(alias):
            raise NotBatchableError(model.__name__)
        model._default_manager.using(alias).bulk_create(objs, ignore_conflicts=ignore_conflicts)
        return None
    sql, by_column = template
    params = _insert_params(fields, values, connection, by_column=by_column)
    cursor = connection.cursor()
    try:
        cursor.execute(sql, params)
    except BaseException:
        cursor.close()
        raise
    if keep_cursor:
        return cursor
    cursor.close()
    return None


_INSERT_FIELDS: dict[type[Model], list[Any]] = {}


def _insert_params(fields: list[Any], values: list[list[Any]], connection: Any, *,
                   by_column: bool) -> list[Any]:
    """The parameters of a cached INSERT: row after row, or (``UNNEST``) one list per column."""
    rows = [[f.get_db_prep_save(v, connection=connection)
             for f, v in zip(fields, row, strict=True) if not hasattr(v, "resolve_expression")]
            for row in values]
    if by_column:
        return [list(column) for column in zip(*rows, strict=True)]
    return [param for row in rows for param in row]


def _insert_template(model: type[Model], fields: list[Any], objs: list[Model],
                     values: list[list[Any]], *, alias: str, ignore_conflicts: bool) -> Any:
    query = InsertQuery(model, on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    query.insert_values(fields, objs, raw=True)  # raw: the values pre_save already produced
    statements = query.get_compiler(using=alias).as_sql()
    if len(statements) != 1:
        return _UNCACHEABLE
    sql, params = statements[0]
    params = list(params)
    connection = connections[alias]
    for by_column in (False, True):
        mine = _insert_params(fields, values, connection, by_column=by_column)
        if len(mine) == len(params) and all(map(_same_param, mine, params)):
            return sql, by_column
    return _UNCACHEABLE


def _same_param(left: Any, right: Any) -> bool:
    if isinstance(left, list) or isinstance(right, list):
        return (isinstance(left, list) and isinstance(right, list) and len(left) == len(right)
                and all(map(_param_equal, left, right)))
    return _param_equal(left, right)
