"""A small orders API on loopback, for the HTTP adapter's tests and the demo (DESIGN.md section 5.8).

Run it in its own process::

    ORDERS_SERVICE_TOKENS="agent:<secret>" python -m runtime.services.orders_service --db orders.sqlite3

It binds 127.0.0.1 (a free port unless ``--port``), prints one JSON line ``{"port": N,
"instance_id": ...}`` when it listens, and serves:

* ``POST /v1/accounts/<account>/orders`` -- body ``{"sku", "quantity", "customer": {"name",
  "email"}}``; needs ``Idempotency-Key`` (the IETF httpapi draft: same key and payload replays
  the original response with ``Idempotent-Replayed: true``, another payload is 422, a request
  still in flight is 409) and checks the fencing token header: a token older than the newest
  seen for the account is refused (409, problem type ``stale-fencing-token``);
* ``GET /v1/accounts/<account>/idempotency/<key>`` and ``.../idempotency`` -- stored records;
* ``GET /v1/accounts/<account>/state`` -- instance id, ledger version and head;
* ``GET /v1/whoami`` -- the credential probe.

Every route needs ``Authorization: Bearer <token>`` with a token from ``ORDERS_SERVICE_TOKENS``
(``label:token,...``; stored as sha256 only). ``--hold-seconds`` keeps each write in flight that
long (409 stories); ``--fail-after-commit`` answers 503 after committing (5xx stories). Crash
points ``orders.after_claim`` and ``orders.after_commit`` (``RATCHET_CRASH_AT``) SIGKILL the
service there. Imports nothing from Django; standard library HTTP server, SQLite store.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from runtime.adapters.http.contract import (
    APPROVAL_HEADER,
    DEFAULT_FENCING_HEADER,
    IDEMPOTENCY_HEADER,
    IN_FLIGHT_TYPE,
    INTENT_HEADER,
    KEY_REUSED_TYPE,
    REPLAYED_HEADER,
    STALE_FENCE_TYPE,
    request_fingerprint,
)
from runtime.core.crashpoints import crash_point, register
from runtime.services.orders_store import OrdersStore

CP_AFTER_CLAIM = register("orders.after_claim", "orders service: key claimed as processing, no order yet")
CP_AFTER_COMMIT = register("orders.after_commit", "orders service: order and response committed, not answered")

TOKENS_ENV = "ORDERS_SERVICE_TOKENS"
_SEGMENT = r"([A-Za-z0-9._~-]{1,200})"
_ROUTES = [
    ("POST", re.compile(rf"^/v1/accounts/{_SEGMENT}/orders$"), "order_create"),
    ("GET", re.compile(rf"^/v1/accounts/{_SEGMENT}/idempotency/([^/]{{1,200}})$"), "record_get"),
    ("GET", re.compile(rf"^/v1/accounts/{_SEGMENT}/idempotency$"), "records_list"),
    ("GET", re.compile(rf"^/v1/accounts/{_SEGMENT}/state$"), "state_get"),
    ("GET", re.compile(r"^/v1/whoami$"), "whoami"),
]
MAX_BODY = 64 * 1024


class OrdersServer(ThreadingHTTPServer):
    """The HTTP server with its store and test knobs."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], *, store: OrdersStore, hold_seconds: float = 0.0,
                 fail_after_commit: bool = False, fencing_header: str = DEFAULT_FENCING_HEADER) -> None:
        super().__init__(address, OrdersHandler)
        self.store = store
        self.hold_seconds = hold_seconds
        self.fail_after_commit = fail_after_commit
        self.fencing_header = fencing_header


class OrdersHandler(BaseHTTPRequestHandler):
    """Routes requests to the store; JSON in, JSON or ``application/problem+json`` out."""

    server: OrdersServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        """Silent: request lines would carry idempotency keys into a log nobody reads."""

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        """Dispatch a GET."""
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        """Dispatch a POST."""
        self._dispatch("POST")

    # -- helpers ----------------------------------------------------------------------------------

    def _send(self, status: int, body: Any, *, problem: bool = False, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, sort_keys=True).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/problem+json" if problem else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _problem(self, status: int, title: str, type_: str = "about:blank") -> None:
        self._send(status, {"type": type_, "title": title, "status": status}, problem=True)

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        for route_method, pattern, name in _ROUTES:
            match = pattern.match(path)
            if match and route_method == method:
                if not token or not self.server.store.credential_valid(token, now=time.time()):
                    self._problem(401, "credential missing, unknown or expired")
                    return
                getattr(self, name)(*[unquote(g) for g in match.groups()])
                return
        self._problem(404, "no such resource")

    # -- routes -----------------------------------------------------------------------------------

    def whoami(self) -> None:
        """The credential probe: 200 while the bearer token is valid."""
        self._send(200, {"ok": True})

    def state_get(self, account: str) -> None:
        """The account's ledger state."""
        self._send(200, self.server.store.state(account=account))

    def record_get(self, account: str, key: str) -> None:
        """The stored record for one idempotency key, or 404."""
        record = self.server.store.lookup(account=account, key=key)
        if record is None:
            self._problem(404, "no record for this idempotency key")
        else:
            self._send(200, _public(record))

    def records_list(self, account: str) -> None:
        """Every record of the account."""
        self._send(200, {"records": [_public(r) for r in self.server.store.records(account=account)]})

    def order_create(self, account: str) -> None:
        """Create an order exactly once per idempotency key (see the module docstring)."""
        key = self.headers.get(IDEMPOTENCY_HEADER, "")
        if not key or len(key) > 200 or not key.isprintable():
            self._problem(400, f"{IDEMPOTENCY_HEADER} header is required")
            return
        token_text = self.headers.get(self.server.fencing_header)
        if token_text is not None and not token_text.isdigit():
            self._problem(400, "fencing token must be a non-negative integer")
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._problem(413, "body too large")
            return
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            self._problem(400, "body is not JSON")
            return
        order = _order_problem(body)
        if isinstance(order, str):
            self._problem(400, order)
            return
        path = self.path.split("?", 1)[0]
        store = self.server.store
        claim = store.claim(account=account, key=key, method="POST", path=path,
                            fingerprint=request_fingerprint(method="POST", path=path, body=body),
                            intent=self.headers.get(INTENT_HEADER), approval=self.headers.get(APPROVAL_HEADER),
                            token=int(token_text) if token_text is not None else None, now=time.time())
        if claim.outcome == "stale_fence":
            self._problem(409, "a newer fencing token has been seen for this account", STALE_FENCE_TYPE)
        elif claim.outcome == "mismatch":
            self._problem(422, "idempotency key already used with another payload", KEY_REUSED_TYPE)
        elif claim.outcome == "in_flight":
            self._problem(409, "a request with this idempotency key is still being processed", IN_FLIGHT_TYPE)
        elif claim.outcome == "replay" and claim.record is not None:
            response = claim.record["response"]
            self._send(response["status"], response["body"], headers={REPLAYED_HEADER: "true",
                                                                      "Location": response["location"]})
        else:
            crash_point(CP_AFTER_CLAIM)
            if self.server.hold_seconds:
                time.sleep(self.server.hold_seconds)
            record = store.complete(account=account, key=key, order=order,
                                    payment_token=f"ptok_{secrets.token_hex(12)}", now=datetime.now(UTC))
            crash_point(CP_AFTER_COMMIT)
            if self.server.fail_after_commit:
                self._problem(503, "upstream hiccup after the commit")
                return
            response = record["response"]
            self._send(response["status"], response["body"], headers={"Location": response["location"]})


def _public(record: dict[str, Any]) -> dict[str, Any]:
    """A record as served: ``in_flight`` says whether a live request still holds a processing claim
    (a claim whose process died has lapsed: nothing committed, a same-key request takes it over)."""
    shown = {k: v for k, v in record.items() if k != "locked_until"}
    shown["in_flight"] = record["status"] == "processing" and record["locked_until"] > time.time()
    return shown


def _order_problem(body: Any) -> dict[str, Any] | str:
    """The validated order, or what is wrong with it."""
    if not isinstance(body, dict) or set(body) != {"sku", "quantity", "customer"}:
        return "body must be {sku, quantity, customer}"
    sku, quantity, customer = body["sku"], body["quantity"], body["customer"]
    if not isinstance(sku, str) or not 1 <= len(sku) <= 100:
        return "sku must be a short string"
    if not isinstance(quantity, int) or isinstance(quantity, bool) or not 1 <= quantity <= 1000:
        return "quantity must be an integer from 1 to 1000"
    if not isinstance(customer, dict) or set(customer) != {"name", "email"} or not all(
            isinstance(v, str) and 0 < len(v) <= 200 for v in customer.values()):
        return "customer must be {name, email} strings"
    return body


def main(argv: list[str] | None = None) -> int:
    """Start the service on loopback and serve until killed."""
    parser = argparse.ArgumentParser(description="A small orders API with Idempotency-Key support.")
    parser.add_argument("--db", required=True, type=Path, help="SQLite file (created if missing)")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--claim-seconds", type=float, default=30.0, help="lease of a processing claim")
    parser.add_argument("--hold-seconds", type=float, default=0.0, help="keep each write in flight this long")
    parser.add_argument("--fail-after-commit", action="store_true", help="answer 503 after committing")
    args = parser.parse_args(argv)
    store = OrdersStore(args.db, claim_seconds=args.claim_seconds)
    for entry in filter(None, os.environ.get(TOKENS_ENV, "").split(",")):
        label, sep, token = entry.partition(":")
        if not sep or not token:
            print(f"{TOKENS_ENV} entries are label:token", file=sys.stderr)
            return 2
        store.credential_add(token=token, label=label)
    server = OrdersServer(("127.0.0.1", args.port), store=store, hold_seconds=args.hold_seconds,
                          fail_after_commit=args.fail_after_commit)
    print(json.dumps({"port": server.server_address[1], "instance_id": store.instance_id()}), flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
