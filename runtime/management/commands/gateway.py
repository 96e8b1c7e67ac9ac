"""``manage.py gateway``: the agent gateway's MCP server (DESIGN.md section 5.12).

Streamable HTTP on ``127.0.0.1:8765/mcp`` by default (uvicorn; DNS-rebinding protection on for
every address: off loopback the host names come from ``RATCHET_GATEWAY_ALLOWED_HOSTS``, and plain
HTTP there is announced as a warning; ``runtime.gateway.binding``), or ``--stdio`` for a client that
starts the server itself (the token then comes from ``RATCHET_GATEWAY_TOKEN``). The JSON API is
served by the web server under ``/api/v1/``.
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser


def _stopped(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


class Command(BaseCommand):
    help = "Serve the MCP gateway: streamable HTTP on 127.0.0.1 (default) or --stdio."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8765)
        parser.add_argument("--stdio", action="store_true", help="serve over stdin/stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        from mcp.server.stdio import stdio_server

        from runtime.gateway.mcp_server import gateway_server, missing_token_error

        if options["stdio"]:
            token = os.environ.get("RATCHET_GATEWAY_TOKEN", "")
            if not token:
                raise CommandError(str(missing_token_error()))
            server = gateway_server(stdio_token=token, stdio_run=os.environ.get("RATCHET_GATEWAY_RUN") or None)

            async def serve() -> None:
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())

            anyio.run(serve)
            return
        import uvicorn
        from django.conf import settings

        from runtime.errors import ConfigurationError
        from runtime.gateway.binding import gateway_binding

        try:
            binding = gateway_binding(host=options["host"], allowed_hosts=settings.RATCHET_GATEWAY_ALLOWED_HOSTS,
                                      tls=settings.RATCHET_TLS)
        except ConfigurationError as exc:
            raise CommandError(exc.message) from None
        for warning in binding.warnings:
            self.stderr.write(self.style.WARNING(warning))
        from runtime.gateway.session_admission import SessionAdmission

        # Only a token holder opens an MCP session (runtime/gateway/session_admission.py).
        app = SessionAdmission(gateway_server().streamable_http_app(host=options["host"],
                                                                    transport_security=binding.security))
        self.stderr.write(f"MCP gateway on http://{options['host']}:{options['port']}/mcp")
        # uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler
        # it found: this one, so a stop by the supervisor ends in exit 0 (runtime/docs/guides/deploy.md).
        signal.signal(signal.SIGTERM, _stopped)
        uvicorn.run(app, host=options["host"], port=options["port"], log_level="warning")
