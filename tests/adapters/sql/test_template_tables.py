"""Story: a SQL template's ``tables`` list must cover every table its statement writes (N16).

The observation of a SQL environment is the rows of the listed tables; a statement that writes
a table left out of the list would change rows no exactly-once or drift check sees. Such a
template is refused when the task spec is loaded, naming the tables it leaves out.
"""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from runtime.adapters.sql.options import SqlAdapterOptions
from runtime.adapters.sql.statement_tables import written_tables
from tests.adapters.sql.support import OPTIONS


def _template(sql: str, tables: list[str], params: dict | None = None) -> dict:
    options = copy.deepcopy(OPTIONS)
    options["templates"] = {"t": {"sql": sql, "tables": tables, "params": params or {}}}
    return options


@pytest.mark.parametrize(("sql", "tables", "missing"), [
    ("INSERT INTO payments (id) VALUES (:id)", ["orders"], "payments"),
    ("UPDATE stock SET qty = qty - 1 WHERE sku = :id", ["orders"], "stock"),
    ("DELETE FROM audit WHERE id = :id", ["orders"], "audit"),
    ("WITH gone AS (DELETE FROM audit WHERE id = :id RETURNING id) INSERT INTO orders (order_id) "
     "SELECT id FROM gone", ["orders"], "audit"),
])
def test_n16_it_refuses_a_template_that_writes_an_unlisted_table(sql: str, tables: list[str], missing: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SqlAdapterOptions.model_validate(_template(sql, tables, {"id": {"type": "string"}}))

    assert "leaves out" in str(caught.value) and missing in str(caught.value)


@pytest.mark.parametrize(("sql", "tables"), [
    ("INSERT INTO orders (order_id) VALUES (:id) ON CONFLICT (order_id) DO UPDATE SET order_id = :id",
     ["orders"]),
    ("UPDATE Orders SET status = 'paid' WHERE order_id = :id", ["orders"]),
    ("INSERT INTO public.orders (order_id) VALUES (:id)", ["orders"]),
    ("UPDATE orders SET status = 'x' FROM customers c WHERE c.id = :id", ["orders"]),  # reads customers only
])
def test_it_accepts_a_template_whose_writes_are_all_listed(sql: str, tables: list[str]) -> None:
    SqlAdapterOptions.model_validate(_template(sql, tables, {"id": {"type": "string"}}))


def test_it_reads_quoted_and_schema_qualified_targets() -> None:
    assert written_tables('DELETE FROM "Order Lines" WHERE id = 1') == {"order lines"}
    assert written_tables("UPDATE ONLY shop.ledger l SET v = 1") == {"ledger"}
    assert written_tables("SELECT 1 FOR UPDATE") == set()
