"""The HTTP adapter's own options, validated by the model the plug-in declares (DESIGN.md section 5.8).

In a task spec they sit beside ``adapter = "http"`` (see ``runtime/task_specs/orders_http.toml``).
They fix what the adapter may ever send -- hosts, methods, path templates -- and where the
service's reads live (state, lookup by key, receipts, credential probe), which fields are secret
or personal, and which environment variables hold the credential and secret inputs. The
credential and the secret inputs themselves are never in the spec, a checkpoint or the trace.
Imports nothing from Django.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from runtime.adapters.http.contract import DEFAULT_FENCING_HEADER
from runtime.adapters.redaction import json_path_parse

_TEMPLATE_SEGMENT = re.compile(r"^(\{[a-z_][a-z0-9_]{0,40}\}|[A-Za-z0-9._~-]{1,200})$")
_HOST_RE = re.compile(r"^[A-Za-z0-9.-]{1,253}(:[0-9]{1,5})?$|^\[[0-9a-fA-F:]{2,45}\](:[0-9]{1,5})?$")
_ENV_NAME = r"^[A-Z_][A-Z0-9_]{0,100}$"
_HEADER_NAME = r"^[A-Za-z0-9-]{1,100}$"


def _path_template(value: str) -> str:
    if not value.startswith("/") or value.endswith("/") and value != "/":
        raise ValueError(f"path template {value!r:.100} must start with '/' and not end with one")
    for segment in value.split("/")[1:]:
        if segment in (".", "..") or not _TEMPLATE_SEGMENT.match(segment):
            raise ValueError(f"path template {value!r:.100} has a malformed segment {segment!r:.40}")
    return value


def _host(value: str) -> str:
    if not _HOST_RE.match(value):
        raise ValueError(f"{value!r:.100} is not a host or host:port")
    return value.lower()


def _json_path(value: str) -> str:
    json_path_parse(value)
    return value


def _lookup_template(value: str) -> str:
    if value.count("{key}") != 1:
        raise ValueError("lookup_path must contain {key} exactly once")
    _path_template(value)
    return value


PathTemplate = Annotated[str, StringConstraints(max_length=1000), AfterValidator(_path_template)]
Host = Annotated[str, StringConstraints(max_length=260), AfterValidator(_host)]
Method = Literal["POST", "PUT", "PATCH", "DELETE"]
EnvName = Annotated[str, StringConstraints(pattern=_ENV_NAME)]


class HttpAdapterOptions(BaseModel):
    """Options of ``adapter = "http"``; every field is checked, unknown ones are refused.

    Attributes:
        base_url: ``http(s)://host[:port]`` the paths are relative to (default: the spec's target).
        allowed_hosts: ``host`` or ``host:port`` an action's URL may name; the base URL's too.
        allowed_methods: write methods an action may use.
        allowed_paths: path templates an action may write to; ``{name}`` matches one segment.
        state_path, lookup_path, receipts_path, probe_path: the service's reads
            (:mod:`runtime.adapters.http.contract`); ``lookup_path`` holds ``{key}``.
        credential_env: the environment variable holding the bearer token.
        fencing_header: the header carrying the lease's fencing token.
        redact_headers: extra header names that are secret (``Authorization`` always is).
        redact_json_paths: dotted paths into request and response bodies that are secret or
            personal (``customer.email``, ``items.*.card``).
        secret_inputs: ``name -> environment variable``; an action body says
            ``{"$secret": "name"}`` where a secret or personal value goes.
        timeout_seconds: per request, in seconds (connect + read).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    base_url: Annotated[str, StringConstraints(pattern=r"^https?://[^/?#\s]+$")] | None = None
    allowed_hosts: Annotated[list[Host], Field(min_length=1)]
    allowed_methods: Annotated[list[Method], Field(min_length=1)]
    allowed_paths: Annotated[list[PathTemplate], Field(min_length=1)]
    state_path: PathTemplate
    lookup_path: Annotated[str, StringConstraints(max_length=1000), AfterValidator(_lookup_template)]
    receipts_path: PathTemplate
    probe_path: PathTemplate
    credential_env: EnvName = "RATCHET_HTTP_TOKEN"
    fencing_header: Annotated[str, StringConstraints(pattern=_HEADER_NAME)] = DEFAULT_FENCING_HEADER
    redact_headers: list[Annotated[str, StringConstraints(pattern=_HEADER_NAME)]] = Field(default_factory=list)
    redact_json_paths: list[Annotated[str, AfterValidator(_json_path)]] = Field(default_factory=list)
    secret_inputs: dict[Annotated[str, StringConstraints(pattern=r"^[a-z_][a-z0-9_]{0,60}$")], EnvName] = Field(
        default_factory=dict)
    timeout_seconds: Annotated[float, Field(gt=0, le=300, allow_inf_nan=False, strict=False)] = 10.0


def path_matches(template: str, path: str) -> bool:
    """Whether ``path`` fits ``template`` segment by segment (``{name}``: one safe segment)."""
    want, got = template.split("/"), path.split("/")
    if len(want) != len(got):
        return False
    for pattern, segment in zip(want, got, strict=True):
        if pattern.startswith("{"):
            if segment in ("", ".", "..") or not re.fullmatch(r"[A-Za-z0-9._~-]{1,200}", segment):
                return False
        elif pattern != segment:
            return False
    return True
