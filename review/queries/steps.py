"""The run page's step timeline: one page of trace events grouped into steps, with durations
(DESIGN.md section 6.8).

A step starts at ``intent.proposed`` and holds what followed it: the approval, the execution and
its receipt, the checkpoint that committed it. Lease bookkeeping is folded (shown on request).
Each stage is placed on a small waterfall in twentieths of its step's duration, so the template
draws it with CSS classes (no inline style under the strict CSP).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

STEP_START = "intent.proposed"
BOOKKEEPING = frozenset({"lease.acquired", "lease.released", "audit.effects"})
"""Events that say who held the run, not what it did: folded by default."""

STAGES = {
    "intent.proposed": "intent",
    "intent.amended": "amendment",
    "approval.requested": "approval",
    "approval.granted": "approval",
    "approval.refreshed": "approval",
    "approval.expired": "approval",
    "approval.refused": "approval",
    "approval.denied": "approval",
    "approval.denied_with_feedback": "approval",
    "write.executed": "execute + receipt",
    "write.reconciled": "execute + receipt",
    "write.outcome_unknown": "execute",
    "checkpoint.committed": "checkpoint",
}
"""Event type -> the stage label it stands for in a step."""

SLOTS = 20
"""Waterfall resolution: positions and widths in twentieths of the step's duration."""


@dataclass(frozen=True)
class Stage:
    """One event in a step: its ``label`` (stage; ``""`` for an event of no stage), offset and
    duration until the next event (seconds), and the waterfall slots ``start`` and ``width``
    (0..SLOTS)."""

    event: Any
    label: str
    offset_seconds: float
    seconds: float
    start: int
    width: int
    bookkeeping: bool


@dataclass
class Step:
    """A group of events: ``number`` (1-based on this page, ``0`` for events before the first
    intent on the page), its ``stages`` and ``duration_seconds`` (first to last event)."""

    number: int
    title: str
    stages: list[Stage] = field(default_factory=list)
    duration_seconds: float = 0.0

    @property
    def main_stages(self) -> list[Stage]:
        return [s for s in self.stages if not s.bookkeeping]

    @property
    def folded(self) -> list[Stage]:
        return [s for s in self.stages if s.bookkeeping]

    @property
    def path(self) -> str:
        """The stages it went through, in order, e.g. ``intent -> approval -> checkpoint``."""
        seen: list[str] = []
        for stage in self.main_stages:
            name = stage.label or stage.event.event_type
            if name not in seen:
                seen.append(name)
        return " → ".join(seen)


def _title(event: Any) -> str:
    payload = event.payload or {}
    action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
    kind = action.get("kind") or payload.get("kind") or ""
    target = action.get("target") or payload.get("target") or ""
    return f"{kind} {target}".strip() or "proposed action"


def _close(step: Step, events: list[Any], times: list[datetime]) -> None:
    total = (times[-1] - times[0]).total_seconds() if times else 0.0
    step.duration_seconds = max(0.0, total)
    for i, event in enumerate(events):
        offset = (times[i] - times[0]).total_seconds()
        after = (times[i + 1] - times[i]).total_seconds() if i + 1 < len(events) else 0.0
        start = round(offset / total * SLOTS) if total > 0 else 0
        width = max(1, round(after / total * SLOTS)) if total > 0 else 1
        step.stages.append(Stage(
            event=event, label=STAGES.get(event.event_type, ""),
            offset_seconds=max(0.0, offset), seconds=max(0.0, after),
            start=min(start, SLOTS - 1), width=min(width, SLOTS - min(start, SLOTS - 1)),
            bookkeeping=event.event_type in BOOKKEEPING,
        ))


def step_timeline(*, events: list[Any]) -> list[Step]:
    """Group ``events`` (one page of ``TraceEvent`` rows, any order) into steps, newest step
    first. Pure: reads only the rows given (no query)."""
    ordered = sorted(events, key=lambda e: e.seq)
    groups: list[tuple[Step, list[Any]]] = []
    current: tuple[Step, list[Any]] | None = None
    number = 0
    for event in ordered:
        if event.event_type == STEP_START or current is None:
            if event.event_type == STEP_START:
                number += 1
                current = (Step(number=number, title=_title(event)), [])
            else:
                current = (Step(number=0, title="before the first step on this page"), [])
            groups.append(current)
        current[1].append(event)
    for step, rows in groups:
        _close(step, rows, [r.created_at for r in rows])
    return [step for step, _ in reversed(groups)]
