"""Child process for crash and concurrency stories: open an adapter, execute one action.

Usage: ``python child_execute.py '<json spec>'``. Prints the receipt as JSON on success. When
``RATCHET_CRASH_AT`` names one of the adapter's crash points, the process SIGKILLs itself there.
With ``start_file`` set it waits for that file first, so several children start writing together.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from runtime.adapters.factory import open_adapter  # noqa: E402
from runtime.core.checkpoint import Action  # noqa: E402


def main() -> int:
    spec = json.loads(sys.argv[1])
    blob_dir = Path(spec["blob_dir"])

    def blobs(digest: str) -> bytes:
        return (blob_dir / digest.removeprefix("sha256:")).read_bytes()

    adapter = open_adapter(spec["kind"], spec["target"])
    start = spec.get("start_file")
    if start:
        deadline = time.monotonic() + 30
        while not Path(start).exists() and time.monotonic() < deadline:
            time.sleep(0.002)
    action = Action.model_validate_json(json.dumps(spec["action"]))
    receipt = adapter.execute(action, idempotency_key=spec["key"],
                              intent_digest=spec["intent_digest"], fencing_token=spec["token"],
                              blobs=blobs)
    print(receipt.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
