"""Writes a checkpoint commit runs in its own transaction, besides the protocol's own rows
(DESIGN.md sections 4.3 and 4.13): the engine's rows (:class:`RowsInsert`: receipt cache,
attachments) and a caller's compare-and-set (:class:`RowUpdate`: the gateway's token count,
section 5.12). Each can run alone (the statement-by-statement commit path) or be sent in the
pipelined batch of a PostgreSQL commit, with the rows it must have written checked when the
batch's results come back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Model

from runtime.database.statements import (
    UpdateBuilder,
    compiled_insert,
    compiled_update,
    compiled_update_cached,
    compiled_update_sent,
)


@dataclass(frozen=True)
class RowsInsert:
    """A write a checkpoint commit runs in its transaction: ``INSERT objs ... ON CONFLICT DO
    NOTHING`` on ``alias`` (DESIGN.md sections 4.3 and 4.13).

    Calling it runs the write on its own (the statement-by-statement commit path). A batched
    commit sends it with its other statements instead (:meth:`send`), and when ``exclusive`` is
    set and a row was already there it rolls back and takes the statement-by-statement path,
    where ``fallback`` (the service's own write, which explains a conflict) runs instead.

    Attributes:
        alias: the database alias.
        objs: unsaved instances of one model.
        exclusive: a row already stored is not the same outcome (the caller must decide).
        fallback: what a call runs instead of the plain INSERT; None: the INSERT.
    """

    alias: str
    objs: tuple[Model, ...]
    exclusive: bool = False
    fallback: Callable[[], Any] | None = None

    def __call__(self) -> None:
        if self.fallback is not None:
            self.fallback()
        else:
            compiled_insert(alias=self.alias, objs=list(self.objs), ignore_conflicts=True)

    @property
    def expected_rows(self) -> int | None:
        """The rows a batched send must have written (None: any; a conflict is no failure)."""
        return len(self.objs) if self.exclusive else None

    def batchable(self) -> bool:
        """Whether a batched commit can send it (an INSERT always can)."""
        return True

    def send(self) -> Any | None:
        """Send the INSERT and return its open cursor (None: it went through ``bulk_create``)."""
        return compiled_insert(alias=self.alias, objs=list(self.objs), ignore_conflicts=True,
                               keep_cursor=True)


@dataclass(frozen=True)
class RowUpdate:
    """A compare-and-set ``UPDATE`` a checkpoint commit runs in its transaction, which must change
    exactly one row (STYLE.md rule 1; DESIGN.md section 5.12: the gateway's token count rides in
    the call's first commit this way).

    Calling it runs the statement on its own (the statement-by-statement commit path) and raises
    ``refused()`` -- a typed error explaining, from a read, why no row matched -- when the
    rowcount is not one, which rolls the whole commit back. A batched commit sends it with its
    other statements (:meth:`send`); a rowcount other than one there rolls the batch back, and
    the statement-by-statement path raises the explanation.

    Attributes:
        alias: the database alias.
        shape / build / slots: as :func:`compiled_update`.
        refused: returns the error for a rowcount other than one (it may read the database).
    """

    alias: str
    shape: tuple[Any, ...]
    build: UpdateBuilder
    slots: Mapping[str, Any]
    refused: Callable[[], Exception]

    expected_rows = 1

    def __call__(self) -> None:
        if compiled_update(alias=self.alias, shape=self.shape, build=self.build, slots=self.slots) != 1:
            raise self.refused()

    def batchable(self) -> bool:
        """Whether a batched commit can send it: an earlier call compiled and checked its text."""
        return compiled_update_cached(alias=self.alias, shape=self.shape, slots=self.slots)

    def send(self) -> Any | None:
        """Send the UPDATE and return its open cursor (see :func:`compiled_update_sent`)."""
        return compiled_update_sent(alias=self.alias, shape=self.shape, slots=self.slots)
