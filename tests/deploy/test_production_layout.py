"""Story: the production layout of the deploy guide runs a run end to end and stops cleanly.

Real processes started from the guide's ``Procfile`` with its ``ratchet.env`` (placeholders
filled; the database, broker and host names pointed at this machine's test PostgreSQL and
Redis): the web process under uvicorn with WhiteNoise, the agent process (the JSON API only, no
private key), a Celery worker, Celery beat and the MCP
gateway. An operator signs in to the dashboard over HTTP (behind a pretend TLS proxy: the
requests carry ``X-Forwarded-Proto: https``) and approves a waiting write, which a worker then
executes once; an agent calls the JSON API with a chunked body (which the development server
drops) and the MCP route of the gateway; beat sends sweeps. Then every process gets SIGTERM and
exits 0. PostgreSQL pass (Redis belongs to it); with ``CI=true`` a missing Redis fails.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import anyio
import httpx
import pytest
from celery import Celery
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from review.roles import roles_sync
from runtime.engine import run_start
from runtime.gateway.tokens import token_issue
from runtime.models import Run
from tests.celery.support import Worker, flush_redis, redis_problem, wait_for_phase
from tests.deploy.layout import (
    LAYOUT_REDIS_URL,
    documented_commands,
    documented_env,
    start,
    stop,
    without_private_keys,
)
from tests.factories import write_scripted_task
from tests.gateway.support import effects_by_key, free_port, write_external_task
from tests.helpers.keys import TestKey
from tests.helpers.procs import child_env, run_manage, wait_for
from tests.review.stories import APPROVAL_STEPS

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PASSWORD = "a long passphrase for the smoke test"
PROXY = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
"""What the TLS-terminating proxy in front of the web process adds to every request."""


class Browser:
    """An HTTP client as a browser behind the proxy: keeps the cookies itself (they are Secure,
    which a client on plain HTTP would never send back) and sends the CSRF token and a same-origin
    Referer with every form."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.cookies: dict[str, str] = {}
        self.http = httpx.Client(base_url=base, timeout=60, follow_redirects=False)

    def _send(self, method: str, path: str, **kwargs: object) -> httpx.Response:
        headers = {**PROXY, "Referer": self.base.replace("http://", "https://") + "/",
                   "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
                   "X-CSRFToken": self.cookies.get("csrftoken", "")}
        response = self.http.request(method, path, headers=headers, **kwargs)
        for header in response.headers.get_list("set-cookie"):
            for name, morsel in SimpleCookie(header).items():
                assert "secure" in header.lower(), f"cookie {name} is not Secure behind TLS"
                self.cookies[name] = morsel.value
        return response

    def get(self, path: str) -> httpx.Response:
        return self._send("GET", path)

    def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        return self._send("POST", path, data=data)


@pytest.fixture
def redis_broker() -> str:
    problem = redis_problem(LAYOUT_REDIS_URL)
    if problem:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {problem}")
        pytest.skip(f"{problem} (set RATCHET_TEST_LAYOUT_REDIS_URL or start Redis)")
    flush_redis(LAYOUT_REDIS_URL)
    return LAYOUT_REDIS_URL


@pytest.fixture
def layout(tmp_path: Path, redis_broker: str, ratchet_keys: dict[str, TestKey]) -> Iterator[dict[str, object]]:
    """The guide's processes, started and ready; every one is stopped (by pid) at the end."""
    ports = {"web": free_port(), "agent": free_port(), "gateway": free_port()}
    web = f"http://127.0.0.1:{ports['web']}"
    env = {k: v for k, v in documented_env(ratchet_keys).items()
           if k not in ("DATABASE_URL", "RATCHET_HWM_DATABASE_URL")}  # the test databases instead
    env.update(CELERY_BROKER_URL=redis_broker, ALLOWED_HOSTS="127.0.0.1",
               CSRF_TRUSTED_ORIGINS=web.replace("http://", "https://"), RATCHET_DASHBOARD_URL=web,
               RATCHET_SWEEP_SECONDS="2", RATCHET_STATIC_ROOT=str(tmp_path / "static"))
    env = child_env(**env)
    collected = run_manage("collectstatic", "--noinput", env=env, timeout=180)
    assert collected.returncode == 0, collected.stderr
    processes: dict[str, Worker] = {}
    try:
        for name, (argv, role_env) in documented_commands(directory=tmp_path, ports=ports).items():
            # The guide: agent-facing processes get ratchet.env without the private-key lines.
            own_env = {**without_private_keys(env), **role_env} if role_env else env
            processes[name] = start(name=name, argv=argv, directory=tmp_path, env=own_env)
        processes["worker"].wait_ready(timeout=120)
        for name in ("web", "agent", "gateway"):
            wait_for(lambda n=name: _listening(ports[n]) or processes[n].proc.poll() is not None,
                     timeout=120, what=f"{name} to listen")
            assert processes[name].proc.poll() is None, processes[name].output()[-3000:]
        yield {"processes": processes, "web": web, "gateway": f"http://127.0.0.1:{ports['gateway']}/mcp",
               "agent": f"http://127.0.0.1:{ports['agent']}", "env": env}
    finally:
        for process in processes.values():
            process.stop()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _hidden(page: str, name: str) -> str:
    match = re.search(rf'name="{name}"\s+value="([^"]+)"', page) or re.search(
        rf'value="([^"]+)"\s+name="{name}"', page)
    assert match, f"no hidden {name} on the page"
    return match.group(1)


def test_the_documented_layout_runs_an_approval_and_gateway_calls_and_stops_cleanly(
        tmp_path: Path, layout: dict[str, object]) -> None:
    began = time.monotonic()
    processes: dict[str, Worker] = layout["processes"]  # type: ignore[assignment]
    roles_sync()
    approver = get_user_model().objects.create_user(username="olivia", password=PASSWORD)
    approver.groups.add(Group.objects.get(name="operator"))

    # A run that stops before its high-risk write, driven by the layout's worker.
    spec = write_scripted_task(tmp_path / "approval", steps=APPROVAL_STEPS, approval_risks=("high",))
    run_id = run_start(spec_path=spec, worker="smoke-starter")
    producer = Celery("smoke-producer", broker=layout["env"]["CELERY_BROKER_URL"], set_as_current=False)
    producer.send_task("ratchet.advance_run", args=[run_id], queue="ratchet")
    producer.close()
    workers = list(processes.values())
    assert wait_for_phase(run_id, ("awaiting_approval", "completed", "failed", "needs_review"), timeout=60,
                          workers=workers) == "awaiting_approval"

    # The operator signs in on the dashboard and approves it.
    browser = Browser(str(layout["web"]))
    login = browser.get("/accounts/login/")
    assert login.status_code == 200 and "csrftoken" in browser.cookies
    signed_in = browser.post("/accounts/login/", {"username": "olivia", "password": PASSWORD})
    assert signed_in.status_code == 302, signed_in.text[:2000]
    queue = browser.get(f"/approvals/?run={run_id}")
    assert queue.status_code == 200, queue.text[:2000]
    stylesheet = re.search(r'href="(/static/[^"]+\.css)"', queue.text)
    assert stylesheet, "the dashboard links its stylesheet"
    static = browser.get(stylesheet.group(1))
    assert static.status_code == 200 and "immutable" in static.headers.get("cache-control", "")
    assert re.search(r"\.[0-9a-f]{12}\.css$", stylesheet.group(1)), "a content-hashed name from collectstatic"
    approved = browser.post(f"/approvals/{run_id}/approve/",
                            {"environment_fingerprint": _hidden(queue.text, "environment_fingerprint")})
    assert approved.status_code == 303, approved.text[:2000]
    assert wait_for_phase(run_id, ("completed", "failed", "needs_review"), timeout=60,
                          workers=workers) == "completed"
    effects = effects_by_key(tmp_path / "approval" / "ws")
    assert len(effects) == 2 and set(effects.values()) == {1}, effects

    # An agent calls the agent process's JSON API with a chunked body, then the gateway's MCP route;
    # neither process holds a private key (DESIGN.md section 2.4).
    for name in ("agent", "gateway"):
        environ = Path(f"/proc/{processes[name].pid}/environ").read_bytes()
        names = {entry.split(b"=", 1)[0] for entry in environ.split(b"\0")}
        assert names.isdisjoint({b"RATCHET_APPROVAL_KEYS", b"RATCHET_REVIEWER_KEYS", b"RATCHET_EXPORT_KEYS"}), name
    assert httpx.get(f"{layout['agent']}/accounts/login/", headers=PROXY, timeout=60).status_code == 404
    gateway_spec = write_external_task(tmp_path / "agent")
    agent_run = run_start(spec_path=gateway_spec, worker="smoke-starter")
    token = token_issue(run_id=agent_run, agent="smoke-agent").token
    body = json.dumps({"call_id": "c1", "tool": "write_file",
                       "arguments": {"path": "notes/chunked.txt", "content": "sent in chunks\n"}}).encode()
    sent = httpx.post(f"{layout['agent']}/api/v1/runs/{agent_run}/calls", timeout=60,
                      content=iter([body[:20], body[20:]]),  # an iterator: httpx sends it chunked
                      headers={**PROXY, "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert sent.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in sent.request.headers
    assert sent.status_code == 200, sent.text
    assert sent.json()["status"] == "executed"

    async def mcp_call() -> object:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with Client(streamable_http_client(str(layout["gateway"]), http_client=http)) as client:
            return await client.call_tool("write_file", {"call_id": "m1", "path": "notes/mcp.txt", "content": "mcp\n"})

    result = anyio.run(mcp_call)
    assert not result.is_error and result.structured_content["status"] == "executed", result
    assert (tmp_path / "agent" / "ws" / "notes" / "chunked.txt").read_text() == "sent in chunks\n"
    assert set(effects_by_key(tmp_path / "agent" / "ws").values()) == {1}
    assert Run.objects.get(run_id=agent_run).phase in ("running", "pending")

    metrics = httpx.get(f"{layout['web']}/metrics", timeout=60,
                        headers={**PROXY, "Authorization": f"Bearer {layout['env']['RATCHET_METRICS_TOKEN']}"})
    assert metrics.status_code == 200 and "ratchet_" in metrics.text
    wait_for(lambda: "Sending due task ratchet.sweep" in processes["beat"].output(), timeout=60,
             what="beat to send a sweep")

    # Every process stops on SIGTERM and exits 0.
    stopping = time.monotonic()
    codes = {name: stop(process) for name, process in processes.items()}
    assert codes == dict.fromkeys(processes, 0), {n: processes[n].output()[-2000:] for n, c in codes.items() if c}
    print(f"\nlayout smoke: {stopping - began:.1f} s from first request to SIGTERM, "
          f"{time.monotonic() - stopping:.1f} s to stop")
