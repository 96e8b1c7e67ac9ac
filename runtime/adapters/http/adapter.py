"""The HTTP adapter: exactly-once writes to an API that honours ``Idempotency-Key`` (DESIGN.md section 5.8).

``adapter = "http"``. Every write carries the action's derived idempotency key in the
``Idempotency-Key`` header (the IETF httpapi draft), the lease's fencing token in a header (a
service that checks it refuses stale writers, DESIGN.md section 4) and the intent and approval
digests, and goes through a maintained client (httpx). What the adapter may send is fixed by its
options (:mod:`runtime.adapters.http.options`): anything else is refused before any request.

Outcomes of a write:

* 2xx (first time, or the draft's replay of the original response): the receipt is the
  service's own stored record for the key, read back by key (:mod:`runtime.adapters.http.receipts`);
* 422, the key is bound to another payload: the stored record is returned as it is, so the engine
  sees a receipt whose intent differs and freezes the run for review (DESIGN.md section 6);
* 409, still in flight: :class:`~runtime.errors.HttpRequestInFlightError`, retried later;
  409 with a stale-fencing-token problem: :class:`~runtime.errors.FencingTokenError`;
* timeout, connection error, 5xx: :class:`~runtime.errors.HttpOutcomeUnknownError`; the engine
  then asks the service for the key (``lookup_receipt``), never sends the write blindly again;
* 401/403: :class:`~runtime.errors.HttpCredentialExpiredError`.

:meth:`HttpAdapter.credentials_check` is the cheap authenticated probe the engine calls before a
resume executes anything (DESIGN.md section 5.9). Secret headers and fields are redacted into
keyed digests before anything leaves the adapter (:mod:`runtime.adapters.redaction`).
Imports nothing from Django.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from runtime.adapters.actions import check_call
from runtime.adapters.base import AdapterContext, BlobSource, Observation
from runtime.adapters.deadline import CommitDeadline
from runtime.adapters.http.contract import (
    APPROVAL_HEADER,
    DEADLINE_HEADER,
    IDEMPOTENCY_HEADER,
    INTENT_HEADER,
    STALE_FENCE_TYPE,
)
from runtime.adapters.http.options import HttpAdapterOptions
from runtime.adapters.http.receipts import (
    ADAPTER_KIND,
    ADAPTER_VERSION,
    record_receipt,
    state_after,
    state_observation,
    state_parse,
)
from runtime.adapters.http.requests import (
    PreparedRequest,
    host_allowed,
    http_action_models,
    request_display,
    request_prepare,
)
from runtime.adapters.redaction import RedactionKey, Redactor, redaction_key_load
from runtime.core.canonical import canonical_json
from runtime.core.checkpoint import Action, Receipt
from runtime.core.crashpoints import crash_point, register
from runtime.errors import (
    AdapterTargetError,
    FencingTokenError,
    HttpContractError,
    HttpCredentialExpiredError,
    HttpOutcomeUnknownError,
    HttpRequestInFlightError,
    HttpRequestRejectedError,
    HttpServiceUnavailableError,
)
from runtime.plugins.registry import plugin

CP_BEFORE_REQUEST = register("http.before_request", "headers built with the key and fencing token, nothing sent")
CP_AFTER_RESPONSE = register("http.after_response", "the service answered the write, no receipt returned yet")


class HttpAdapter:
    """An HTTP API as an environment (see the module docstring).

    Args:
        target: the base URL (``http(s)://host[:port]``) unless ``options.base_url`` gives it.
        options: :class:`HttpAdapterOptions` or its mapping form from a task spec.
        environ: where the credential and secret inputs are read (default ``os.environ``).
        redaction_key: the key for redacted evidence (default :func:`redaction_key_load`).
        transport: an httpx transport (tests); default the network.

    Raises:
        AdapterTargetError: no usable base URL, or its host is not in ``allowed_hosts``.
        pydantic.ValidationError: options that do not validate.
        RedactionKeyError: the redaction key is malformed.
    """

    kind = ADAPTER_KIND
    accepts_not_after = True
    adapter_version = ADAPTER_VERSION
    options_model = HttpAdapterOptions

    def __init__(self, target: str | Path | None = None, options: HttpAdapterOptions | Mapping[str, Any] | None = None,
                 *, environ: Mapping[str, str] | None = None, redaction_key: RedactionKey | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        if options is None:
            raise AdapterTargetError("the HTTP adapter needs its options (hosts, methods, paths)", kind="http")
        self.options = options if isinstance(options, HttpAdapterOptions) else HttpAdapterOptions.model_validate(
            dict(options))
        base = self.options.base_url or (str(target) if target is not None else "")
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
            raise AdapterTargetError("the HTTP adapter's target must be a base URL http(s)://host[:port]",
                                     kind="http")
        if not host_allowed(parts.netloc.lower(), self.options.allowed_hosts):
            raise AdapterTargetError("the base URL's host is not in allowed_hosts", kind="http",
                                     host=parts.netloc[:200])
        self.base_url = f"{parts.scheme}://{parts.netloc.lower()}"
        self._environ = os.environ if environ is None else environ
        self.redactor = Redactor.build(key=redaction_key or redaction_key_load(environ=self._environ),
                                       headers=self.options.redact_headers,
                                       json_paths=self.options.redact_json_paths)
        # trust_env=False: no proxy or netrc from the environment may redirect or decorate a write.
        self._client = httpx.Client(timeout=self.options.timeout_seconds, follow_redirects=False,
                                    trust_env=False, transport=transport)
        self._instance: str | None = None

    # -- identity and observation ----------------------------------------------------------------

    @property
    def namespace(self) -> str:
        """Receipt namespace, ``"http:<service instance id>"``."""
        return f"{ADAPTER_KIND}:{self.instance_id()}"

    def instance_id(self) -> str:
        """The service instance's id from its state (asked once per adapter object)."""
        if self._instance is None:
            self.observe()
        return self._instance or ""

    def observe(self) -> Observation:
        """The service's state: instance, ledger version ``l<N>`` and a fingerprint over its head.

        Raises:
            HttpServiceUnavailableError, HttpCredentialExpiredError, HttpContractError.
        """
        obs = state_observation(self._read_json(self.options.state_path))
        self._instance = obs.instance_id
        return obs

    def action_schemas(self) -> dict[str, dict[str, Any]]:
        """Each declared action's JSON schema (``{"target", "params"}``), as a planner's tools."""
        return {kind: model.model_json_schema() for kind, model in http_action_models(options=self.options).items()}

    def credentials_check(self) -> None:
        """Probe the service with the credential; called before a resume executes anything.

        Raises:
            HttpCredentialExpiredError: no credential configured, or the service refuses it.
            HttpServiceUnavailableError: the service cannot be reached (retry later).
        """
        self._read(self.options.probe_path)

    # -- writes ------------------------------------------------------------------------------------

    def execute(self, action: Action, *, idempotency_key: str, intent_digest: str, fencing_token: int,
                blobs: BlobSource, approval_digest: str | None = None,
                not_after: CommitDeadline | None = None) -> Receipt:
        """Send the write once with its key and fencing token; return the service's stored receipt.

        ``not_after`` (DESIGN.md section 5.5): the commit point is the service's, so the adapter
        checks the deadline immediately before sending and tells the service the seconds left
        (``Ratchet-Deadline-Seconds``); a service that honours it refuses a late commit itself.
        The receipt's ``committed_at`` is the service's own record.

        Raises:
            InvalidActionError, HttpRequestNotAllowedError: refused before any request.
            CommitDeadlinePassedError: ``not_after`` passed before the request; nothing sent.
            HttpOutcomeUnknownError: timeout, connection error or 5xx (settle by key).
            HttpRequestInFlightError: 409, an earlier request with this key is still running.
            FencingTokenError: the service has seen a newer fencing token.
            HttpCredentialExpiredError, HttpRequestRejectedError: nothing was written.
        """
        check_call(idempotency_key=idempotency_key, intent_digest=intent_digest, fencing_token=fencing_token,
                   approval_digest=approval_digest, not_after=not_after)
        prepared = self._prepare(action)
        headers = {IDEMPOTENCY_HEADER: idempotency_key, self.options.fencing_header: str(fencing_token),
                   INTENT_HEADER: intent_digest, "Content-Type": "application/json", **self._auth()}
        if approval_digest is not None:
            headers[APPROVAL_HEADER] = approval_digest
        content = canonical_json(prepared.body) if prepared.body is not None else b""
        crash_point(CP_BEFORE_REQUEST)
        if not_after is not None:
            not_after.check(instance_id=self._instance, idempotency_key=idempotency_key)
            headers[DEADLINE_HEADER] = f"{max(not_after.remaining_seconds(), 0.0):.3f}"
        try:
            response = self._client.request(prepared.method, prepared.url, content=content, headers=headers)
        except httpx.HTTPError as exc:
            raise HttpOutcomeUnknownError(f"HTTP write got no answer ({type(exc).__name__})",
                                          idempotency_key=idempotency_key) from None
        crash_point(CP_AFTER_RESPONSE)
        status = response.status_code
        if status >= 500:
            raise HttpOutcomeUnknownError(f"HTTP write answered {status}", idempotency_key=idempotency_key)
        if status == 409:
            problem = _problem_type(response)
            if problem == STALE_FENCE_TYPE:
                raise FencingTokenError("the service has seen a newer fencing token", fencing_token=fencing_token,
                                        idempotency_key=idempotency_key)
            raise HttpRequestInFlightError(idempotency_key=idempotency_key, problem=problem or "none")
        if status in (401, 403):
            raise HttpCredentialExpiredError(f"the service answered {status} to the write",
                                             idempotency_key=idempotency_key)
        if status != 422 and not 200 <= status < 300:
            raise HttpRequestRejectedError(f"the service answered {status}; it says nothing was written",
                                           idempotency_key=idempotency_key)
        # 2xx or 422: the authoritative receipt is the record the service stored for the key.
        try:
            receipt = self.lookup_receipt(idempotency_key)
        except HttpServiceUnavailableError:
            raise HttpOutcomeUnknownError("the write was answered but its record cannot be read back",
                                          idempotency_key=idempotency_key) from None
        if receipt is None:
            raise HttpContractError(f"the service answered {status} but holds no record for the key",
                                    idempotency_key=idempotency_key)
        return receipt

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        """The service's stored record for the key as a receipt, or None when it holds none.

        Raises:
            HttpRequestInFlightError: the key's request is still being processed.
            HttpServiceUnavailableError, HttpCredentialExpiredError, HttpContractError.
        """
        path = self.options.lookup_path.replace("{key}", quote(idempotency_key, safe=""))
        record = self._read_json(path, missing_ok=True)
        if record is None:
            return None
        if isinstance(record, dict) and record.get("status") == "processing":
            if record.get("in_flight") is False:
                # The claiming request died before committing: nothing happened under the key,
                # and a same-key, same-payload request takes the lapsed claim over.
                return None
            raise HttpRequestInFlightError(idempotency_key=idempotency_key)
        return record_receipt(record, instance_id=self.instance_id(), redactor=self.redactor)

    def receipts(self) -> list[Receipt]:
        """Every completed record the service holds for this resource, oldest first."""
        listing = self._read_json(self.options.receipts_path)
        records = listing.get("records") if isinstance(listing, dict) else None
        if not isinstance(records, list):
            raise HttpContractError("the service's receipt listing has no records list")
        done = [r for r in records if isinstance(r, dict) and r.get("status") == "complete"]
        done.sort(key=lambda r: r.get("ledger_version") if isinstance(r.get("ledger_version"), int) else -1)
        return [record_receipt(r, instance_id=self.instance_id(), redactor=self.redactor) for r in done]

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        """The state fingerprint after this one write (the ledger chain advanced by its request)."""
        prepared = self._prepare(action)
        return state_after(self._read_json(self.options.state_path), prepared.fingerprint)

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> str:
        """The request as an approver sees it, secrets and personal fields redacted; sends nothing."""
        prepared = self._prepare(action)
        _, version, _ = state_parse(self._read_json(self.options.state_path))
        headers = {IDEMPOTENCY_HEADER: "(the run's derived key)",
                   self.options.fencing_header: "(the lease's fencing token)", **self._auth(required=False)}
        return request_display(action, prepared, redactor=self.redactor, headers=headers,
                               ledger=f"l{version} -> l{version + 1}")

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    # -- plumbing ----------------------------------------------------------------------------------

    def _prepare(self, action: Action) -> PreparedRequest:
        return request_prepare(action, options=self.options, base_url=self.base_url, environ=self._environ)

    def _auth(self, *, required: bool = True) -> dict[str, str]:
        token = self._environ.get(self.options.credential_env, "")
        if not token:
            if not required:
                return {}
            raise HttpCredentialExpiredError("no credential is configured", variable=self.options.credential_env)
        return {"Authorization": f"Bearer {token}"}

    def _read(self, path: str, *, missing_ok: bool = False) -> httpx.Response | None:
        try:
            response = self._client.get(self.base_url + path, headers=self._auth())
        except httpx.HTTPError as exc:
            raise HttpServiceUnavailableError(f"GET failed ({type(exc).__name__})", path=path[:200]) from None
        if response.status_code in (401, 403):
            raise HttpCredentialExpiredError(f"the service answered {response.status_code}", path=path[:200])
        if response.status_code == 404 and missing_ok:
            return None
        if response.status_code >= 500 or response.status_code == 429:
            raise HttpServiceUnavailableError(f"GET answered {response.status_code}", path=path[:200])
        if response.status_code != 200:
            raise HttpContractError(f"GET answered {response.status_code}", path=path[:200])
        return response

    def _read_json(self, path: str, *, missing_ok: bool = False) -> Any:
        response = self._read(path, missing_ok=missing_ok)
        if response is None:
            return None
        try:
            return response.json()
        except ValueError:
            raise HttpContractError("the service's answer is not JSON", path=path[:200]) from None


@plugin(options=HttpAdapterOptions)
def http_adapter(*, options: HttpAdapterOptions, context: AdapterContext) -> HttpAdapter:
    """The ``http`` adapter plug-in (entry point ``ratchet.adapters: http``).

    ``options.base_url`` names the service: a spec's ``target`` is resolved as a filesystem path
    by the run creation, which a URL does not survive.

    Raises:
        AdapterTargetError: no ``base_url`` in the options, or its host is not allowed.
    """
    if options.base_url is None:
        raise AdapterTargetError("the http adapter needs environment.options.base_url", kind="http")
    return HttpAdapter(options=options)


# The plug-in's declared actions, read by the task spec to check a planner's known actions
# (runtime/taskspec/planned_actions.py) without opening the adapter: no request at load time.
http_adapter.action_models = http_action_models  # type: ignore[attr-defined]


def _problem_type(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get("type") if isinstance(body, dict) else None
    return value[:200] if isinstance(value, str) else None
