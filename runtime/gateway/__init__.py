"""The agent gateway: MCP server and JSON API in front of a run's write path (DESIGN.md sections
5.12 and 5.13).

* :mod:`runtime.gateway.tokens` -- per-run tokens: issue, authorise, rate-limit, revoke;
* :mod:`runtime.gateway.operator_credentials` -- operators' credentials for starting runs and
  issuing tokens through the API, one tenant each;
* :mod:`runtime.gateway.tools` -- the run's tools, a call checked into an action, derived call ids;
* :mod:`runtime.gateway.calls` -- :func:`~runtime.gateway.calls.call_submit`, the write path;
* :mod:`runtime.gateway.reads` -- status, calls, receipts and the pending approval, read from the
  committed checkpoint;
* :mod:`runtime.gateway.workspace_reads` -- one file or folder of the run, within the policy's paths;
* :mod:`runtime.gateway.mcp_server` and :mod:`runtime.gateway.mcp_reads` -- the MCP server
  (``manage.py gateway``) and what it offers to read.

The client SDK that speaks the JSON API is a distribution of its own, ``runtime/client_sdk/``
(``ratchet_client``), which imports nothing from here.
"""
