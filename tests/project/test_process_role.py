"""Story: N13, agent traffic is served by a process that holds no private key
(``runtime.project.process_role``, DESIGN.md section 2.4).

A real ``RATCHET_PROCESS_ROLE=agent`` web process (a child on the test database, keyed like a
worker: the checkpoint key and the public keys only) answers an agent's calls, including one that
waits for an approval, which the signing side (this test, holding the approval key as the web
process does) grants; it serves nothing else. The same role refuses to start with a private key
in its environment or without its keys, naming variables, never values.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.test import override_settings

from runtime.core.signing import TrustRoot
from runtime.decisions.approvals import approval_grant, approvals_waiting
from runtime.engine import run_start
from runtime.errors import KeyringError
from runtime.gateway.tokens import token_issue
from runtime.keys import signer_for
from runtime.project.process_role import AGENT_KEY_VARIABLES, PRIVATE_KEY_VARIABLES, process_role_refusal
from tests.gateway.support import effects_by_key, free_port, write_external_task
from tests.helpers.keys import TestKey
from tests.helpers.procs import ROOT, child_env, run_manage, wait_listening

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def _agent_env(keys: dict[str, TestKey], **extra: str) -> dict[str, str]:
    """The environment an agent process gets: the test database, no private key, no key file."""
    env = child_env(RATCHET_PROCESS_ROLE="agent", RATCHET_CREATE_KEY_FILE="0", RATCHET_LEASE_SECONDS="2",
                    RATCHET_KEY_FILE=str(Path(child_env()["RATCHET_VAR_DIR"]) / "no-such-keys.json"),
                    **dict.fromkeys(PRIVATE_KEY_VARIABLES))
    for root in ("approval", "reviewer", "export"):
        env[f"RATCHET_{root.upper()}_PUBLIC_KEYS"] = keys[root].public_spec
    env["RATCHET_CHECKPOINT_KEYS"] = keys["checkpoint"].spec
    return {**env, **extra}


def test_n13_the_agent_role_names_what_it_refuses_and_never_a_value() -> None:
    keyed = {name: "kid:c2VjcmV0" for name in AGENT_KEY_VARIABLES}
    assert process_role_refusal(role="all", environ={"RATCHET_APPROVAL_KEYS": "kid:x"}) is None
    assert process_role_refusal(role="agent", environ=keyed) is None
    refusal = process_role_refusal(role="agent", environ={**keyed, "RATCHET_REVIEWER_KEYS": "kid:c2VjcmV0"})
    assert refusal and "RATCHET_REVIEWER_KEYS" in refusal and "c2VjcmV0" not in refusal
    missing = process_role_refusal(role="agent", environ={})
    assert missing and all(name in missing for name in AGENT_KEY_VARIABLES)
    assert "is not one of" in (process_role_refusal(role="dashboard", environ=keyed) or "")


def test_n13_an_agent_process_with_a_private_key_does_not_start(ratchet_keys: dict[str, TestKey]) -> None:
    env = _agent_env(ratchet_keys, RATCHET_APPROVAL_KEYS=ratchet_keys["approval"].spec)
    started = run_manage("check", env=env, timeout=120)
    assert started.returncode != 0
    assert "RATCHET_APPROVAL_KEYS" in started.stderr and "refuses private keys" in started.stderr
    assert ratchet_keys["approval"].b64 not in started.stderr + started.stdout
    without_public = _agent_env(ratchet_keys, RATCHET_EXPORT_PUBLIC_KEYS="")
    refused = run_manage("check", env=without_public, timeout=120)
    assert refused.returncode != 0 and "RATCHET_EXPORT_PUBLIC_KEYS" in refused.stderr


def test_n13_an_agent_process_signs_for_no_asymmetric_root(ratchet_keys: dict[str, TestKey]) -> None:
    with override_settings(RATCHET_PROCESS_ROLE="agent"):
        for root in (TrustRoot.APPROVAL, TrustRoot.REVIEWER, TrustRoot.EXPORT):
            with pytest.raises(KeyringError, match="signs nothing"):
                signer_for(root)


def test_n13_an_agent_process_serves_agents_through_an_approval_and_nothing_else(
        tmp_path: Path, ratchet_keys: dict[str, TestKey]) -> None:
    spec = write_external_task(tmp_path)
    run_id = run_start(spec_path=spec, worker="n13-starter")
    token = token_issue(run_id=run_id, agent="n13-agent").token
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "runtime.project.asgi:application",
                             "--host", "127.0.0.1", "--port", str(port)],
                            cwd=ROOT, env=_agent_env(ratchet_keys), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(proc, port, what="the agent process")
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        assert not [v for v in environ if v.split(b"=", 1)[0].decode() in PRIVATE_KEY_VARIABLES]
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
            plain = http.post(f"/api/v1/runs/{run_id}/calls", json={
                "call_id": "low", "tool": "write_file", "arguments": {"path": "notes/a.txt", "content": "a\n"}})
            assert plain.status_code == 200 and plain.json()["status"] == "executed", plain.text
            risky = {"call_id": "risky", "tool": "write_file",
                     "arguments": {"path": "config/app.toml", "content": "mode = 1\n"}}
            waiting = http.post(f"/api/v1/runs/{run_id}/calls", json=risky)
            assert waiting.json()["status"] == "waiting_for_approval", waiting.text
            assert waiting.json()["approval_url"].startswith("http"), "an absolute link to the dashboard"
            # The signing side (the dashboard's process) approves; the agent process never could.
            [pending] = approvals_waiting(run_ids=[run_id])
            approval_grant(run_id=run_id, approver="olivia",
                           environment_fingerprint=pending.environment_fingerprint)
            done = http.post(f"/api/v1/runs/{run_id}/calls", json=risky)
            assert done.json()["status"] == "executed", done.text
            for path in ("/", "/accounts/login/", "/admin/", f"/runs/{run_id}/"):
                answer = http.get(path)
                assert answer.status_code == 404 and answer.json()["error"]["code"], (path, answer.text[:300])
        assert set(effects_by_key(tmp_path / "ws").values()) == {1}
        assert (tmp_path / "ws" / "config" / "app.toml").read_text() == "mode = 1\n"
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.communicate(timeout=60)


@override_settings(ROOT_URLCONF="runtime.project.urls_agent")
def test_n13_every_path_an_agent_process_does_not_serve_is_the_json_404(client) -> None:  # type: ignore[no-untyped-def]
    for method, path in (("get", "/api/v1/"), ("get", "/"), ("post", "/zzz"), ("post", "/admin/login/"),
                         ("delete", "/api/v1/zzz")):
        answer = getattr(client, method)(path)
        assert answer.status_code == 404 and answer.json()["error"]["code"], (method, path, answer.content[:200])
    assert client.get("/api/v1/docs").status_code == 200, "the API's own docs page is served"


def test_n13_keys_agent_env_writes_the_agent_environment_and_no_private_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ratchet_keys: dict[str, TestKey]) -> None:
    out = tmp_path / "agent.env"
    done = run_manage("keys", "agent-env", "--out", str(out), timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_mode & 0o777 == 0o600
    env = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert set(env) == set(AGENT_KEY_VARIABLES)
    assert env["RATCHET_CHECKPOINT_KEYS"] == ratchet_keys["checkpoint"].spec
    for root in ("approval", "reviewer", "export"):
        assert env[f"RATCHET_{root.upper()}_PUBLIC_KEYS"] == ratchet_keys[root].public_spec
        assert ratchet_keys[root].b64 not in out.read_text(), "never a private key"
    assert ratchet_keys["checkpoint"].b64 not in done.stdout + done.stderr, "a key is never printed"
    again = run_manage("keys", "agent-env", "--out", str(out), timeout=120)
    assert again.returncode != 0 and "exists already" in again.stderr
    checked = run_manage("check", env={**_agent_env(ratchet_keys), **env}, timeout=120)
    assert checked.returncode == 0, checked.stderr
