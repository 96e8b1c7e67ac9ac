"""An adapter plug-in written before commit deadlines existed (DESIGN.md section 5.5).

It delegates to the workspace adapter but its ``execute`` has the old signature: handed a
``not_after`` it would raise ``TypeError``. Loaded by ``adapter = "python"`` with
``entry = "tests.engine.legacy_plugin:LegacyWorkspace"``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.adapters.base import AdapterContext, BlobSource, Observation
from runtime.adapters.workspace.adapter import WorkspaceAdapter
from runtime.core.checkpoint import Action, Receipt


class LegacyWorkspace:
    """A directory, through a plug-in that knows nothing of deadlines."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

    kind = "workspace"

    def __init__(self, *, options: Options, context: AdapterContext) -> None:
        self._inner = WorkspaceAdapter(context.target)
        self.namespace = self._inner.namespace
        self.adapter_version = self._inner.adapter_version

    def instance_id(self) -> str:
        return self._inner.instance_id()

    def observe(self) -> Observation:
        return self._inner.observe()

    def execute(self, action: Action, *, idempotency_key: str, intent_digest: str, fencing_token: int,
                blobs: BlobSource, approval_digest: str | None = None) -> Receipt:
        return self._inner.execute(action, idempotency_key=idempotency_key, intent_digest=intent_digest,
                                   fencing_token=fencing_token, blobs=blobs, approval_digest=approval_digest)

    def fence_advance(self, fencing_token: int) -> None:
        self._inner.fence_advance(fencing_token)

    def lookup_receipt(self, idempotency_key: str) -> Receipt | None:
        return self._inner.lookup_receipt(idempotency_key)

    def receipts(self) -> list[Receipt]:
        return self._inner.receipts()

    def predict_post_state(self, action: Action, *, blobs: BlobSource) -> str:
        return self._inner.predict_post_state(action, blobs=blobs)

    def dry_run_diff(self, action: Action, *, blobs: BlobSource) -> Any:
        return self._inner.dry_run_diff(action, blobs=blobs)
