"""A verifier: every note the planner was asked for is in the store, with its text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.verifiers import VerifierOutcome


class NotesPresent:
    """``[verifier] kind = "notes-present"``: keys ``<prefix>-1`` .. ``<prefix>-<notes>`` exist."""

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)
        notes: int = Field(ge=1, le=1000)
        prefix: str = "note"

    def __init__(self, *, options: Options, context: Any) -> None:
        self.options = options

    def verify(self, *, observation: Any, target: Path, planner_state: Any) -> VerifierOutcome:
        data = json.loads((Path(target) / "kv.json").read_text())["data"]
        want = {f"{self.options.prefix}-{n}" for n in range(1, self.options.notes + 1)}
        missing = sorted(want - set(data))
        if missing:
            return VerifierOutcome(False, f"{len(missing)} note(s) missing: {', '.join(missing[:5])}")
        return VerifierOutcome(True, f"all {len(want)} notes present (version {observation.version})")
