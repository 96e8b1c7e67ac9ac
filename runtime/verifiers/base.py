"""The verifier plug-in protocol: what a verifier is given and what it answers (DESIGN.md section 5.10).

A verifier decides whether the environment now holds what the task asked for. Plug-in authors
import :class:`Verifier`, :class:`VerifierContext` and :class:`VerifierOutcome` from here (or from
:mod:`runtime.verifiers`, which re-exports them); the built-in verifiers are in
:mod:`runtime.verifiers.builtin` and :mod:`runtime.verifiers.command`. Framework-free.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from runtime.adapters.base import Observation
    from runtime.taskspec import TaskSpec

MAX_DETAIL_CHARS = 4000
"""The longest detail a checkpoint's ``VerifierResult`` keeps."""

OUTPUT_RE = re.compile(r"\boutput (sha256:[0-9a-f]{64})\b")
"""How a verdict's detail names its output attachment: ``output sha256:<hex>``."""


@dataclass(frozen=True)
class VerifierOutcome:
    """A verdict and a short human-readable reason (at most a few hundred characters).

    ``output_digest``: the ``sha256:`` digest of an attachment holding what the verifier saw (a
    command's combined output), or None. :func:`verify` makes the detail name it
    (``output sha256:...``), so the signed ``VerifierResult`` binds it to the version.
    """

    passed: bool
    detail: str
    output_digest: str | None = None


def verifier_output_digest(text: str) -> str | None:
    """The output attachment a verdict's detail (or a stop detail) names, or None."""
    found = OUTPUT_RE.search(text or "")
    return found.group(1) if found else None


def outcome_with_output(outcome: VerifierOutcome) -> VerifierOutcome:
    """The outcome with a detail of at most :data:`MAX_DETAIL_CHARS` that names its output."""
    digest = outcome.output_digest
    if digest is None or verifier_output_digest(outcome.detail[:MAX_DETAIL_CHARS]) == digest:
        return outcome
    tail = f" (output {digest})"
    return VerifierOutcome(outcome.passed, outcome.detail[: MAX_DETAIL_CHARS - len(tail)] + tail, digest)


@dataclass(frozen=True)
class VerifierContext:
    """What a verifier plug-in is constructed with, beside its options.

    Attributes:
        spec: the run's task spec (a verifier may compare with what the planner was given).
        base_dir: resolves relative paths of the spec (None for a hand-built spec).
        put_blob: stores bytes as a content-addressed attachment and returns its ``sha256:``
            digest; the engine's stores the row with the checkpoint that records the verdict
            (None outside the engine).
    """

    spec: TaskSpec
    base_dir: Path | None = None
    put_blob: Callable[[bytes], str] | None = None


class Verifier(Protocol):
    """What the engine needs of a verifier plug-in (DESIGN.md section 5.10)."""

    def verify(self, *, observation: Observation, target: Path,
               planner_state: Mapping[str, Any] | None) -> VerifierOutcome:
        """The verdict for ``target`` as observed in ``observation`` (read-only).

        Raises:
            VerifierError: what it compares against cannot be reached (retryable); any other
                exception becomes :class:`PluginFailedError`.
        """
        ...
