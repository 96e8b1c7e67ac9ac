"""The agent gateway: MCP server and JSON API in front of a run's write path (DESIGN.md section 5.12).

* :mod:`runtime.gateway.tokens` -- per-run tokens: issue, authorise, rate-limit, revoke;
* :mod:`runtime.gateway.tools` -- the run's tools and a call checked into an action;
* :mod:`runtime.gateway.calls` -- :func:`~runtime.gateway.calls.call_submit`, the write path;
* :mod:`runtime.gateway.reads` -- status, calls and receipts, read from the committed checkpoint;
* :mod:`runtime.gateway.mcp_server` -- the MCP server (``manage.py gateway``).
"""
