"""From an ``http_request`` action to the exact request the adapter may send (DESIGN.md section 5.8).

Action shape: ``Action(kind="http_request", target="/v1/accounts/acme/orders" or a full
``http(s)://host[:port]/path``, params={"method": "POST", "body": {...}})``. Everything is checked
against the adapter's allowlist *before* any request is made: the host (the base URL's, or the
one the target names), the method, the path template; a query string, a fragment, user info or
an unknown parameter is refused.

Secret and personal values never travel inside an action (it is checkpointed and traced): at a
redacted JSON path the body must hold a placeholder ``{"$secret": "<input name>"}``, resolved at
request time from the environment variable the options name. A raw value at such a path is
refused, so it cannot reach a checkpoint by mistake. Imports nothing from Django.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StringConstraints, create_model

from runtime.adapters.http.contract import request_fingerprint
from runtime.adapters.http.options import HttpAdapterOptions, path_matches
from runtime.adapters.redaction import Redactor, json_path_parse
from runtime.core.checkpoint import Action
from runtime.errors import HttpRequestNotAllowedError, InvalidActionError

HTTP_REQUEST = "http_request"
SECRET_MARK = "$secret"


@dataclass(frozen=True)
class PreparedRequest:
    """One allowlisted request, ready to send.

    Attributes:
        method: upper-case method.
        url: absolute URL.
        path: the path part (what the service fingerprints).
        body: the JSON body with secret inputs resolved (never stored; None for no body).
        fingerprint: :func:`request_fingerprint` of method, path and resolved body (hex).
        secret_values: the resolved secret strings, so error text can be scrubbed of them.
    """

    method: str
    url: str
    path: str
    body: Any
    fingerprint: str
    secret_values: tuple[str, ...]


class _ActionShape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


HttpTarget = Annotated[str, StringConstraints(min_length=1, max_length=4096, pattern=r"^(/|https?://)")]
"""An action's target: a path below the base URL, or an absolute ``http(s)://`` URL."""


def http_action_models(*, options: HttpAdapterOptions) -> dict[str, type[BaseModel]]:
    """The adapter's declared actions: ``{"http_request": model of {"target", "params"}}``.

    The model's JSON schema is the action's schema (DESIGN.md section 5.10): ``params`` is
    ``{"method": one of allowed_methods, "body": JSON}``. It checks the action's *shape*; whether
    the host and path are allowed is checked by :func:`request_prepare` before any request.
    """
    params = create_model("HttpRequestParams", __base__=_ActionShape,
                          __doc__="The write's method and JSON body; secrets as {\"$secret\": NAME}.",
                          method=(Literal[tuple(options.allowed_methods)], ...),  # type: ignore[arg-type]
                          body=(JsonValue, None))
    action = create_model("HttpRequestAction", __base__=_ActionShape,
                          __doc__="Send one write with the run's Idempotency-Key and fencing token.",
                          target=(HttpTarget, Field(..., description="a path below the base URL fitting one of "
                                                    + ", ".join(options.allowed_paths))),
                          params=(params, ...))
    return {HTTP_REQUEST: action}


def _refuse(message: str, **context: Any) -> HttpRequestNotAllowedError:
    return HttpRequestNotAllowedError(message, **context)


def _split_target(target: str, base_url: str) -> tuple[str, str, str]:
    """``(scheme, host[:port], path)`` of an action target, a path or an absolute URL."""
    base = urlsplit(base_url)
    if target.startswith("/"):
        if "?" in target or "#" in target:
            raise _refuse("an HTTP action's path may not carry a query or a fragment", path=target[:200])
        return base.scheme, base.netloc.lower(), target
    parts = urlsplit(target)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _refuse("an HTTP action's target is a path or an http(s) URL", target=target[:200])
    if parts.username or parts.password or "@" in parts.netloc:
        raise _refuse("an HTTP action's URL may not carry user info", host=parts.hostname)
    if parts.query or parts.fragment:
        raise _refuse("an HTTP action's URL may not carry a query or a fragment", host=parts.netloc)
    return parts.scheme, parts.netloc.lower(), parts.path or "/"


DEFAULT_PORTS = {"http": 80, "https": 443}


def service_of(scheme: str, netloc: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of a URL's service, the port made explicit (80 / 443)."""
    parts = urlsplit(f"{scheme}://{netloc}")
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or DEFAULT_PORTS.get(scheme, 0)


def host_allowed(netloc: str, allowed: list[str]) -> bool:
    """``host:port`` is allowed when it, or its bare host, is listed."""
    host = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
    return netloc in allowed or host in allowed


def _resolve(node: Any, inputs: Mapping[str, str], environ: Mapping[str, str], found: list[str]) -> Any:
    if isinstance(node, dict):
        if set(node) == {SECRET_MARK}:
            name = node[SECRET_MARK]
            env_name = inputs.get(name) if isinstance(name, str) else None
            if env_name is None:
                raise _refuse("the action names a secret input the adapter options do not declare",
                              secret_input=str(name)[:60])
            value = environ.get(env_name)
            if not value:
                raise _refuse("a secret input's environment variable is not set", secret_input=name,
                              variable=env_name)
            found.append(value)
            return value
        return {k: _resolve(v, inputs, environ, found) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v, inputs, environ, found) for v in node]
    return node


def _raw_at_redacted_path(body: Any, path: tuple[str, ...]) -> bool:
    if not path:
        return not (isinstance(body, dict) and set(body) == {SECRET_MARK})
    head, rest = path[0], path[1:]
    if isinstance(body, dict):
        names = list(body) if head == "*" else [head] if head in body else []
        return any(_raw_at_redacted_path(body[n], rest) for n in names)
    if isinstance(body, list):
        indexes = range(len(body)) if head == "*" else [int(head)] if head.isdigit() and int(head) < len(body) else []
        return any(_raw_at_redacted_path(body[i], rest) for i in indexes)
    return False


def _placeholder_paths(node: Any, at: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The body paths at which ``{"$secret": NAME}`` placeholders stand."""
    if isinstance(node, dict):
        if set(node) == {SECRET_MARK}:
            return [at]
        return [p for k, v in node.items() for p in _placeholder_paths(v, (*at, str(k)))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _placeholder_paths(v, (*at, str(i)))]
    return []


def _covered(path: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    # A redacted path redacts the whole value at it, so it covers every path below it too.
    return len(pattern) <= len(path) and all(p in ("*", c) for p, c in zip(pattern, path, strict=False))


def request_prepare(action: Action, *, options: HttpAdapterOptions, base_url: str,
                    environ: Mapping[str, str]) -> PreparedRequest:
    """Check ``action`` against the allowlist and build the request it stands for; sends nothing.

    Raises:
        InvalidActionError: not an ``http_request`` action, or malformed params.
        HttpRequestNotAllowedError: host, method or path outside the allowlist; a raw value at a
            redacted path; an undeclared or unset secret input.
    """
    if action.kind != HTTP_REQUEST:
        raise InvalidActionError(f"the HTTP adapter executes {HTTP_REQUEST} actions, not {action.kind!r}")
    unknown = set(action.params) - {"method", "body"}
    if unknown or "method" not in action.params:
        raise InvalidActionError(f"{HTTP_REQUEST} params are method and body; unknown {sorted(unknown)}")
    method = action.params["method"]
    if not isinstance(method, str) or method not in options.allowed_methods:
        raise _refuse("HTTP method not in the adapter's allowed_methods", method=str(method)[:20])
    scheme, netloc, path = _split_target(action.target, base_url)
    if not host_allowed(netloc, options.allowed_hosts):
        raise _refuse("host not in the adapter's allowed_hosts", host=netloc[:200])
    base = urlsplit(base_url)
    if service_of(scheme, netloc) != service_of(base.scheme, base.netloc):
        # The bearer credential, the receipts and the lookups by key all belong to the base URL's
        # service: a write anywhere else would carry the credential to another listener (another
        # scheme or port of a listed host) and could never be reconciled by key after a crash.
        raise _refuse("an action may name only the service of the adapter's base URL (its scheme, host "
                      "and port): the credential and the receipts belong to it", host=netloc[:200],
                      scheme=scheme)
    if not any(path_matches(t, path) for t in options.allowed_paths):
        raise _refuse("path fits none of the adapter's allowed_paths templates", path=path[:200])
    raw_body = action.params.get("body")
    for text in options.redact_json_paths:
        if _raw_at_redacted_path(raw_body, json_path_parse(text)):
            raise _refuse("a secret or personal field must be given as {\"$secret\": NAME}, never inline",
                          json_path=text)
    patterns = [json_path_parse(text) for text in options.redact_json_paths]
    for placed in _placeholder_paths(raw_body):
        # A secret's clear value would otherwise reach the receipt, the ledger, the trace and
        # the evidence bundle: it may stand only where the body is redacted (DESIGN.md section 5.9).
        if not any(_covered(placed, pattern) for pattern in patterns):
            raise _refuse("a {\"$secret\": NAME} placeholder may only stand at a path the adapter redacts "
                          "(redact_json_paths)", json_path="$." + ".".join(placed)[:200])
    found: list[str] = []
    body = _resolve(raw_body, options.secret_inputs, environ, found)
    return PreparedRequest(method=method, url=f"{scheme}://{netloc}{path}", path=path, body=body,
                           fingerprint=request_fingerprint(method=method, path=path, body=body),
                           secret_values=tuple(found))


def request_display(action: Action, prepared: PreparedRequest, *, redactor: Redactor, headers: Mapping[str, str],
                    ledger: str) -> str:
    """The dry-run text an approver sees: method, URL, redacted headers and body, ledger move."""
    lines = [f"{prepared.method} {prepared.url}"]
    lines += [f"{name}: {value}" for name, value in sorted(redactor.redact_headers(headers).items())]
    # The resolved body, so a secret input's digest here equals the one in the receipt later.
    shown = redactor.redact_json(prepared.body)
    lines += ["", json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False), "", f"ledger: {ledger}"]
    return redactor.scrub_text("\n".join(lines) + "\n", prepared.secret_values)
