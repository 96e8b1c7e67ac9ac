"""Story: approving an HTTP write from a shell without the service's token says what is missing.

A fresh user approved the demo's orders run with ``manage.py approvals approve`` in a shell that
had no ``RATCHET_HTTP_TOKEN`` (the dashboard's server had it, so the web page worked). Approving
first asks the HTTP adapter whether the write already happened, which needs the token; the error
said the run "stays frozen", although it was only waiting for an approval. Now the command says
that nothing was approved, that the run is still awaiting approval, which variable is missing
and how to supply it; with the token set, the same command approves (DESIGN.md section 6.2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.decisions.approvals import approvals_waiting
from runtime.engine import run_advance, run_start
from runtime.models import Run
from tests.adapters.http.support import EMAIL_ENV, TOKEN_ENV, OrdersService, orders  # noqa: F401
from tests.engine.http.support import order_steps, write_orders_task
from tests.helpers.procs import child_env, run_manage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting_run(tmp_path: Path, orders: OrdersService, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    """An HTTP run whose one (high-risk) order waits for an approval."""
    for name in (TOKEN_ENV, EMAIL_ENV, "RATCHET_REDACTION_KEY"):
        monkeypatch.setenv(name, orders.env[name])
    steps = [{**step, "risk": "high"} for step in order_steps(1)]
    run_id = run_start(spec_path=write_orders_task(tmp_path, orders, steps=steps, approval_risks=("high",)))
    assert run_advance(run_id=run_id).phase == "awaiting_approval"
    return run_id


def _shell(orders: OrdersService, token: str | None) -> dict[str, str]:  # noqa: F811
    """A shell's environment: the test database and the adapter's other inputs; ``token`` or none."""
    return child_env(**{TOKEN_ENV: token, EMAIL_ENV: orders.env[EMAIL_ENV],
                        "RATCHET_REDACTION_KEY": orders.env["RATCHET_REDACTION_KEY"]})


def _approve(run_id: str, env: dict[str, str]):
    fingerprint = next(i for i in approvals_waiting() if i.run_id == run_id).environment_fingerprint
    return run_manage("approvals", "approve", run_id, "--approver", "olivia", "--fingerprint", fingerprint, env=env)


def test_it_says_the_run_still_awaits_approval_and_which_variable_is_missing(
        waiting_run: str, orders: OrdersService) -> None:  # noqa: F811
    refused = _approve(waiting_run, _shell(orders, None))

    assert refused.returncode == 1
    message = " ".join(refused.stderr.split())
    assert f"nothing was approved: run {waiting_run} is still awaiting approval" in message
    assert f"This shell has no {TOKEN_ENV}: set it to the service's bearer token" in message
    assert "manage.py demo" in message and "services.json" in message
    assert "frozen" not in message and "Traceback" not in message
    assert orders.env[TOKEN_ENV] not in refused.stderr + refused.stdout
    assert Run.objects.get(run_id=waiting_run).phase == "awaiting_approval"
    assert orders.orders_per_key() == {}

    approved = _approve(waiting_run, _shell(orders, orders.env[TOKEN_ENV]))

    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith(f"granted: run {waiting_run} is now ")


def test_it_says_the_service_refused_the_credential_this_shell_holds(
        waiting_run: str, orders: OrdersService) -> None:  # noqa: F811
    refused = _approve(waiting_run, _shell(orders, "tok-revoked-long-ago"))

    assert refused.returncode == 1
    message = " ".join(refused.stderr.split())
    assert f"nothing was approved: run {waiting_run} is still awaiting approval" in message
    assert "The service refused the credential this shell holds" in message
    assert "frozen" not in message and "tok-revoked-long-ago" not in message
    assert Run.objects.get(run_id=waiting_run).phase == "awaiting_approval"
