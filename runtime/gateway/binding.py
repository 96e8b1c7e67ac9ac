"""Where the MCP gateway listens, and what it accepts there (DESIGN.md section 5.12).

On a loopback address the MCP SDK turns DNS-rebinding protection on by itself (Host and Origin
must be the loopback names). Anywhere else it would turn it off, and tokens would travel over
plain HTTP without a word. :func:`gateway_binding` keeps the protection on for every address:
a non-loopback bind needs the host names clients reach it by, and it says so loudly when the
gateway is not behind TLS (``RATCHET_TLS``). Framework-free: settings come in as arguments.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from mcp.server.transport_security import TransportSecuritySettings

from runtime.errors import ConfigurationError

LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class GatewayBinding:
    """``security``: the Host/Origin check the MCP app applies; ``warnings``: what the command
    prints before it starts (plain HTTP off loopback)."""

    security: TransportSecuritySettings
    warnings: tuple[str, ...]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def gateway_binding(*, host: str, allowed_hosts: Sequence[str], tls: bool) -> GatewayBinding:
    """The transport security for a gateway bound to ``host``.

    Args:
        host: the bind address (``--host``).
        allowed_hosts: the host names clients use to reach a non-loopback gateway
            (``RATCHET_GATEWAY_ALLOWED_HOSTS``); their Host header must be one of them.
        tls: whether a TLS-terminating proxy fronts the gateway (``RATCHET_TLS``).

    Raises:
        ConfigurationError: a non-loopback bind names no allowed host (DNS-rebinding protection
            cannot be kept without them).
    """
    names = [h.strip() for h in allowed_hosts if h.strip()]
    if is_loopback(host):
        names = ["127.0.0.1", "localhost", "[::1]", *names]
    elif not names:
        raise ConfigurationError(
            f"the gateway binds to {host}, which is not loopback, and no allowed host is set: set "
            "RATCHET_GATEWAY_ALLOWED_HOSTS to the names clients reach it by, so DNS-rebinding "
            "protection stays on")
    schemes = ("https",) if tls else ("https", "http")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[pattern for name in names for pattern in (name, f"{name}:*")],
        allowed_origins=[f"{scheme}://{name}{port}" for name in names for scheme in schemes
                         for port in ("", ":*")],
    )
    warnings = () if tls or is_loopback(host) else (
        f"WARNING: the gateway listens on {host} over plain HTTP: bearer tokens cross the network "
        "in clear. Put it behind a TLS-terminating proxy and set RATCHET_TLS=1.",)
    return GatewayBinding(security=security, warnings=warnings)
