"""Which tables a template's statement writes, read with sqlparse (DESIGN.md section 5).

A template lists the ``tables`` its statement touches, and their rows make up the observation
that every exactly-once and drift check compares. A statement that writes a table it does not
list would change rows no observation covers, so the task spec is refused at load time. The
statement is tokenised by ``sqlparse`` (the tokenizer Django itself uses), and every data-changing
target is collected: ``INSERT INTO t``, ``UPDATE t``, ``DELETE FROM t`` anywhere in the statement,
including data-modifying ``WITH`` clauses; the ``UPDATE`` of ``ON CONFLICT ... DO UPDATE`` and of
``FOR UPDATE`` names no table and is skipped. Framework-free.
"""

from __future__ import annotations

import sqlparse
from sqlparse import tokens as T


def _name(token: sqlparse.sql.Token) -> str:
    value = token.value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"`":
        value = value[1:-1]
    return value.lower()


NOT_A_TABLE = frozenset({"SET", "NOWAIT", "SKIP", "OF", "WHERE", "RETURNING", "DEFAULT", "VALUES", "SELECT"})
"""Keywords that may follow ``UPDATE`` where it names no table (``DO UPDATE SET``, ``FOR UPDATE
NOWAIT``/``SKIP LOCKED``/``OF t``) or that end a clause."""


def written_tables(sql: str) -> set[str]:
    """The lower-cased names of the tables ``sql`` inserts into, updates or deletes from.

    A schema-qualified target (``public.orders``) is returned by its table name (``orders``),
    since templates list table names. Table names that are also SQL words (``archive``,
    ``audit``) count as names where the grammar puts a table.

    Args:
        sql: one SQL statement.

    Returns:
        The set of table names; a statement that writes nothing returns an empty set.

    Raises:
        ValueError: an ``INSERT INTO`` or ``DELETE FROM`` whose table cannot be read.
    """
    significant = [t for statement in sqlparse.parse(sql) for t in statement.flatten()
                   if not t.is_whitespace and t.ttype not in T.Comment]
    found: set[str] = set()
    for index, token in enumerate(significant):
        if token.ttype not in T.Keyword.DML:
            continue
        verb = token.normalized
        at = index + 1
        if verb in ("INSERT", "DELETE"):
            expected = "INTO" if verb == "INSERT" else "FROM"
            if at >= len(significant) or significant[at].normalized != expected:
                continue
            at += 1
        elif verb != "UPDATE":
            continue
        if at < len(significant) and significant[at].normalized == "ONLY":  # PostgreSQL: no child tables
            at += 1
        parts: list[str] = []
        while at < len(significant) and _is_name(significant[at]):
            parts.append(_name(significant[at]))
            if at + 2 < len(significant) and significant[at + 1].value == "." and _is_name(significant[at + 2]):
                at += 2
                continue
            break
        if parts:
            found.add(parts[-1])
        elif verb != "UPDATE":
            raise ValueError(f"cannot tell which table the {verb} writes")
    return found


def _is_name(token: sqlparse.sql.Token) -> bool:
    if token.ttype in (T.Name, T.Literal.String.Symbol):
        return True
    return token.ttype in T.Keyword and token.ttype not in T.Keyword.DML and token.normalized not in NOT_A_TABLE
