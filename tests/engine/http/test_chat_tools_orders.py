"""Story: a model books orders through the HTTP adapter, via the chat-tools planner (DESIGN.md sections 5.8, 6.7).

The fake model server (its own process, loopback) is offered the HTTP adapter's declared action,
``http_request``, as a tool whose JSON schema comes from the adapter's action model and the run's
options (``method`` is one of ``allowed_methods``); it answers with scripted tool calls. The orders
service (its own process, its own SQLite store) receives the writes. Counts come from the
service's store and from the fake model's own request counters. A SIGKILL of the worker after the
service answered, and a resume in another process, leave one order per key and ask the model once
per committed step.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from runtime.engine import run_advance, run_start
from runtime.models import Run
from runtime.planners.chat_tools.tools import toolset_for
from tests.adapters.http.support import OrdersService, options
from tests.engine.http.support import (
    ORDERS_PATH,
    manage_resume,
    manage_run,
    order_body,
    run_keys,
    toml_value,
)
from tests.engine.support import restore
from tests.helpers.procs import KILLED
from tests.planners.chat_tools.support import chat_planner_lines

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "Book tea-000 and tea-001 for Ada, then finish."


def book(n: int, *, target: str = ORDERS_PATH) -> dict[str, Any]:
    """A scripted reply: the model calls ``http_request`` for order ``n``."""
    return {"tool": "http_request", "arguments": {"target": target, "params": {"method": "POST",
                                                                               "body": order_body(n)}}}


STEPS = [[book(0)], [book(1)], [{"finish": "two orders booked"}]]


def write_chat_orders_task(directory: Path, service: OrdersService, *, base_url: str,
                           approval_risks: tuple[str, ...] = (), risk: str = "low") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    lines = [
        "[task]", 'id = "orders-chat"', 'version = "1"', "",
        "[policy]", 'id = "orders"', 'version = "1"', 'allowed_actions = ["http_request"]', "allowed_paths = []",
        f"approval_risks = {toml_value(list(approval_risks))}", "",
        "[policy.budgets]", "proposals = 20", "steps = 20", "wall_seconds = 600", "",
        "[environment]", 'adapter = "http"', 'target = "."', f"options = {toml_value(options(service.port))}", "",
        *chat_planner_lines(base_url=base_url, task=TASK, risks={"http_request": risk}), "",
        "[verifier]", 'kind = "always"', "",
    ]
    path = directory / "task.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def test_it_offers_the_http_action_with_the_schema_the_options_allow() -> None:
    toolset = toolset_for("http", options=options(8765), allowed=("http_request",))

    assert toolset.actions == ("http_request",)
    params = toolset.tools[0]["function"]["parameters"]
    assert "$defs" not in params and params["required"] == ["params", "target"]
    assert params["properties"]["params"]["properties"]["method"]["const"] == "POST"
    assert "/v1/accounts/{account}/orders" in params["properties"]["target"]["description"]
    assert [t["function"]["name"] for t in toolset.tools] == ["http_request", "finish"]


def test_it_books_the_orders_the_model_proposes(tmp_path: Path, orders: OrdersService, fake_model,
                                                secrets_in_env: None) -> None:
    server = fake_model(STEPS)
    run_id = run_start(spec_path=write_chat_orders_task(tmp_path, orders, base_url=server.base_url))

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("completed", "verified")
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, 2), 1)
    assert server.requests_per_step() == {0: 1, 1: 1, 2: 1}


def test_it_waits_for_an_approval_of_a_model_proposed_order(tmp_path: Path, orders: OrdersService, fake_model,
                                                            secrets_in_env: None) -> None:
    server = fake_model(STEPS)
    task = write_chat_orders_task(tmp_path, orders, base_url=server.base_url, approval_risks=("high",), risk="high")
    run_id = run_start(spec_path=task)

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("awaiting_approval", "approval_required")
    pending = restore(run_id).state.pending
    assert (pending.action.kind, pending.action.target) == ("http_request", ORDERS_PATH)
    assert pending.action.params["body"]["customer"]["email"] == {"$secret": "customer_email"}
    assert orders.orders_per_key() == {}, "nothing is sent before the approval"


def test_it_stops_a_model_call_to_a_host_the_options_do_not_allow(tmp_path: Path, orders: OrdersService,
                                                                  fake_model, secrets_in_env: None) -> None:
    server = fake_model([[book(0, target="http://127.0.0.2:9/v1/accounts/acme/orders")]])
    run_id = run_start(spec_path=write_chat_orders_task(tmp_path, orders, base_url=server.base_url))

    report = run_advance(run_id=run_id)

    assert (report.phase, report.stop_reason) == ("needs_review", "adapter_refused")
    assert orders.orders_per_key() == {}


@pytest.mark.parametrize(("point", "nth", "asked"), [
    pytest.param("http.after_response", 2, {0: 1, 1: 1, 2: 1}, id="service-answered-receipt-unsaved"),
    pytest.param("chat_tools.after_reply_recorded", 2, {0: 1, 1: 2, 2: 1}, id="reply-recorded-not-committed"),
])
def test_it_books_each_order_once_after_a_kill_and_resume(tmp_path: Path, orders: OrdersService, fake_model,
                                                          point: str, nth: int, asked: dict[int, int]) -> None:
    server = fake_model(STEPS)
    task = write_chat_orders_task(tmp_path, orders, base_url=server.base_url)

    killed = manage_run(task, orders, RATCHET_CRASH_AT=f"{point}:{nth}", RATCHET_LEASE_SECONDS="3")
    assert killed.returncode == KILLED, (killed.returncode, killed.stdout, killed.stderr)
    run_id = re.search(r"run ([0-9a-f]{32})", killed.stdout + killed.stderr).group(1)
    resumed = manage_resume(run_id, orders)

    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    assert Run.objects.get(run_id=run_id).phase == "completed"
    assert orders.orders_per_key() == dict.fromkeys(run_keys(run_id, 2), 1)
    assert server.requests_per_step() == asked
