"""Child process for the SQL adapter's crash and race stories: open the adapter, execute one action.

Usage: ``python child_sql.py '<json spec>'`` with ``url``, ``options``, ``action``, ``key``,
``token`` and optionally ``start_file`` (wait for it before executing, so several children write
together). Prints ``{"receipt": ...}`` or ``{"error": "<class name>"}`` as one JSON line. With
``RATCHET_CRASH_AT`` naming one of the adapter's crash points the process SIGKILLs itself there.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from runtime.adapters.sql.adapter import SqlAdapter  # noqa: E402
from runtime.core.checkpoint import Action  # noqa: E402
from runtime.errors import RatchetError  # noqa: E402


def main() -> int:
    spec = json.loads(sys.argv[1])
    adapter = SqlAdapter(options={**spec["options"], "url": spec["url"]})
    start = spec.get("start_file")
    if start:
        deadline = time.monotonic() + 60
        while not Path(start).exists() and time.monotonic() < deadline:
            time.sleep(0.002)
    action = Action.model_validate_json(json.dumps(spec["action"]))
    for attempt in range(5):
        try:
            receipt = adapter.execute(action, idempotency_key=spec["key"], intent_digest=action.intent_digest(),
                                      fencing_token=spec["token"], blobs=lambda digest: b"")
            break
        except RatchetError as exc:
            # A worker retries what is retryable (a loaded server refusing a connection for a
            # moment), as Celery would; anything else is the answer the story checks.
            if exc.retryable and attempt < 4:
                time.sleep(0.5)
                continue
            print(json.dumps({"error": type(exc).__name__}))
            return 3
    print(json.dumps({"receipt": receipt.model_dump(mode="json")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
