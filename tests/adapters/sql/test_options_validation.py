"""The SQL adapter's options are validated by its own pydantic model: statements are single,
parameterized, fully declared and keep away from the adapter's tables; URLs carry no password."""

from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from runtime.adapters.sql.options import SqlAdapterOptions
from runtime.errors import AdapterTargetError
from tests.adapters.sql.support import OPTIONS


def _with_template(**changes) -> dict:
    options = copy.deepcopy(OPTIONS)
    options["templates"]["record_order"].update(changes)
    return options


@pytest.mark.parametrize(("options", "problem"), [
    (_with_template(sql="INSERT INTO orders (order_id) VALUES (:order_id); DROP TABLE orders"), "one statement"),
    (_with_template(sql="INSERT INTO orders (order_id) VALUES (:order_id, :other)"), "without a parameter"),
    (_with_template(sql="DELETE FROM ratchet_sql_receipts WHERE idempotency_key = :key"), "adapter's own table"),
    (_with_template(tables=[]), "tables"),
    ({**OPTIONS, "url": "postgres://app:hunter2@127.0.0.1/shop"}, "password"),
    ({**OPTIONS, "redact_columns": ["orders.card; --"]}, "redact_columns"),
])
def test_it_rejects_options_naming_the_problem(options: dict, problem: str) -> None:
    with pytest.raises(ValidationError) as caught:
        SqlAdapterOptions.model_validate(options)

    # As the task spec loader renders it: locations and messages, never the input values.
    rendered = str(caught.value.errors(include_url=False, include_input=False))
    assert problem in rendered
    assert "hunter2" not in rendered


def test_it_refuses_a_scheme_other_than_sqlite_or_postgres() -> None:
    from runtime.adapters.sql.adapter import SqlAdapter

    with pytest.raises(AdapterTargetError):
        SqlAdapter(options={**OPTIONS, "url": "mysql://127.0.0.1/shop"})
