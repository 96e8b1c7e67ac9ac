"""Child process for the HTTP crash stories: open an HTTP adapter, execute one action.

Usage: ``python child_http_execute.py '<json spec>'`` with ``options``, ``action``, ``key``,
``intent_digest`` and ``token``. Prints the receipt as JSON on success; a typed error is printed
as ``{"error": ClassName}`` with exit code 3. When ``RATCHET_CRASH_AT`` names one of the
adapter's crash points, the process SIGKILLs itself there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from runtime.adapters.http.adapter import HttpAdapter  # noqa: E402
from runtime.core.checkpoint import Action  # noqa: E402
from runtime.errors import RatchetError  # noqa: E402


def main() -> int:
    spec = json.loads(sys.argv[1])
    adapter = HttpAdapter(options=spec["options"])
    action = Action.model_validate_json(json.dumps(spec["action"]))
    try:
        receipt = adapter.execute(action, idempotency_key=spec["key"], intent_digest=spec["intent_digest"],
                                  fencing_token=spec["token"], blobs=lambda digest: b"")
    except RatchetError as exc:
        print(json.dumps({"error": type(exc).__name__}))
        return 3
    print(receipt.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
