"""An adapter: a key-value store in one JSON file that keeps its own receipts by idempotency key.

``<target>/kv.json`` holds the data, the receipts and the newest fencing token seen. A write
replaces the file atomically (write, fsync, rename), so the value and its receipt land together:
the store itself is the authoritative receipt store (DESIGN.md section 5.2), and a key it has
seen is answered from its receipt, never written twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.adapters.base import AdapterContext, Observation
from runtime.core.canonical import DigestKind, digest
from runtime.core.checkpoint import Action, Receipt
from runtime.errors import FencingTokenError, InvalidActionError


class KeyValueStore:
    """``[environment] adapter = "kv-store"``: ``put`` actions set ``target`` to ``params.value``."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)

    kind = "kv-store"
    adapter_version = "example-kv/1"

    def __init__(self, *, options: Options, context: AdapterContext) -> None:
        self.root = Path(context.target)
        self.root.mkdir(parents=True, exist_ok=True)
        self.file = self.root / "kv.json"
        with self._locked():
            if not self.file.exists():
                self._save({"instance": uuid.uuid4().hex, "version": 0, "fence": 0, "data": {}, "receipts": []})
        self.namespace = f"{self.kind}:{self.instance_id()}"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / "kv.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _load(self) -> dict[str, Any]:
        return json.loads(self.file.read_text(encoding="utf-8"))

    def _save(self, store: dict[str, Any]) -> None:
        tmp = self.file.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(store, out, sort_keys=True)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.file)
        dir_fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def instance_id(self) -> str:
        return str(self._load()["instance"])

    def observe(self) -> Observation:
        store = self._load()
        return Observation(instance_id=store["instance"], version=f"v{store['version']}", kind=self.kind,
                           state_fingerprint=digest(DigestKind.ENVIRONMENT, store["data"]))

    def _applied(self, action: Action) -> dict[str, Any]:
        value = action.params.get("value")
        if action.kind != "put" or not action.target or not isinstance(value, str):
            raise InvalidActionError("kv-store takes put actions with a target key and a string value")
        return {**self._load()["data"], action.target: value}

    def execute(self, action: Action, *, idempotency_key: str, intent_digest: str, fencing_token: int,
                blobs: Any, approval_digest: str | None = None) -> Receipt:
        with self._locked():
            store = self._load()
            if fencing_token < store["fence"]:
                raise FencingTokenError("stale fencing token", fencing_token=fencing_token)
            for seen in store["receipts"]:
                if seen["idempotency_key"] == idempotency_key:
                    return Receipt.model_validate(seen)  # this key already wrote: never again
            data = self._applied(action)
            version = store["version"] + 1
            receipt = Receipt(namespace=self.namespace, adapter_version=self.adapter_version,
                              receipt_id=f"kv-{version}", idempotency_key=idempotency_key,
                              intent_digest=intent_digest, result={"key": action.target},
                              environment_version_after=f"v{version}", fencing_token=fencing_token,
                              approval_digest=approval_digest)
            store.update(version=version, fence=fencing_token, data=data,
                         receipts=[*store["receipts"], receipt.model_dump(mode="json")])
            self._save(store)  # the value and its receipt commit together
            return receipt

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        return next((r for r in self.receipts() if r.idempotency_key == idempotency_key), None)

    def receipts(self) -> list[Receipt]:
        return [Receipt.model_validate(r) for r in self._load()["receipts"]]

    def predict_post_state(self, action: Action, *, blobs: Any) -> str:
        return digest(DigestKind.ENVIRONMENT, self._applied(action))

    def dry_run_diff(self, action: Action, *, blobs: Any) -> str:
        old = self._load()["data"].get(action.target)
        return f"--- {action.target}\n+++ {action.target}\n-{old}\n+{action.params.get('value')}\n"
