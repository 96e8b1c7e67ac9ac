"""Story: an operator binds the MCP gateway off loopback (N8, DESIGN.md section 5.12).

The SDK keeps DNS-rebinding protection only for loopback binds; the gateway keeps it for every
address. Off loopback it needs the host names clients use (``RATCHET_GATEWAY_ALLOWED_HOSTS``) and
refuses to start without them, and over plain HTTP it warns that tokens cross the network in clear.
"""

from __future__ import annotations

import pytest

from runtime.errors import ConfigurationError
from runtime.gateway.binding import gateway_binding, is_loopback
from tests.helpers.procs import child_env, run_manage


def test_n8_it_keeps_dns_rebinding_protection_off_loopback() -> None:
    binding = gateway_binding(host="0.0.0.0", allowed_hosts=["gw.example.org"], tls=False)

    assert binding.security.enable_dns_rebinding_protection is True
    assert "gw.example.org:*" in binding.security.allowed_hosts
    assert "127.0.0.1:*" not in binding.security.allowed_hosts
    assert any("plain HTTP" in w for w in binding.warnings)


def test_it_takes_only_https_origins_behind_tls_and_says_nothing() -> None:
    binding = gateway_binding(host="10.1.2.3", allowed_hosts=["gw.example.org"], tls=True)

    assert binding.warnings == ()
    assert all(origin.startswith("https://") for origin in binding.security.allowed_origins)


def test_it_refuses_a_non_loopback_bind_without_allowed_hosts() -> None:
    with pytest.raises(ConfigurationError, match="RATCHET_GATEWAY_ALLOWED_HOSTS"):
        gateway_binding(host="0.0.0.0", allowed_hosts=[], tls=False)


def test_it_keeps_the_loopback_default_quiet_and_protected() -> None:
    binding = gateway_binding(host="127.0.0.1", allowed_hosts=[], tls=False)

    assert binding.warnings == ()
    assert binding.security.enable_dns_rebinding_protection is True
    assert {"127.0.0.1:*", "localhost:*", "[::1]:*"} <= set(binding.security.allowed_hosts)


@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.0.0.9", True), ("::1", True),
                                                ("[::1]", True), ("localhost", True), ("0.0.0.0", False),
                                                ("192.0.2.7", False), ("gateway.internal", False)])
def test_it_knows_a_loopback_address(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_n8_the_command_refuses_to_start_off_loopback_without_allowed_hosts() -> None:
    done = run_manage("gateway", "--host", "0.0.0.0", "--port", "1", env=child_env())

    assert done.returncode != 0
    assert "RATCHET_GATEWAY_ALLOWED_HOSTS" in done.stderr
