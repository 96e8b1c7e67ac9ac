"""Story: a scripted planner places N orders through the HTTP adapter, end to end (DESIGN.md section 5.8).

An operator runs ``manage.py run`` (a child process) on a task whose ``[[planner.steps]]`` are
generic ``http_request`` steps; the orders service runs in its own process on loopback. The run
completes, and the service's own SQLite store holds exactly one order per derived key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import Run
from runtime.taskspec import SHIPPED_TASKS_DIR
from tests.adapters.http.support import OrdersService
from tests.engine.http.support import manage_run, run_id_of, run_keys, write_orders_task

ORDERS = 4


@pytest.mark.django_db(transaction=True)
def test_it_places_one_order_per_step_through_the_engine(tmp_path: Path, orders: OrdersService) -> None:
    task = write_orders_task(tmp_path, orders, count=ORDERS)

    done = manage_run(task, orders)

    assert done.returncode == 0 and "verdict: completed" in done.stdout, (done.stdout, done.stderr)
    run_id = run_id_of(done)
    assert Run.objects.get(run_id=run_id).phase == "completed"
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, ORDERS), 1)
    assert orders.adapter().observe().version == f"l{ORDERS}"


@pytest.mark.django_db(transaction=True)
def test_it_runs_the_shipped_orders_task(tmp_path: Path, orders: OrdersService, secrets_in_env: None) -> None:
    shipped = (SHIPPED_TASKS_DIR / "orders_http.toml").read_text(encoding="utf-8")
    assert shipped.count("127.0.0.1:8765") == 2  # its service's documented port, in base_url and allowed_hosts
    task = tmp_path / "orders_http.toml"
    task.write_text(shipped.replace("127.0.0.1:8765", f"127.0.0.1:{orders.port}"), encoding="utf-8")

    run_id = run_start(spec_path=task)

    assert run_advance(run_id=run_id).phase == "completed"
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, 3), 1)
