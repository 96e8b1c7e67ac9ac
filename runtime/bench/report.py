"""What one ``manage.py bench`` measured: :class:`BenchReport`, its metrics, counts and targets,
rendered as a Markdown table and as JSON."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

MIB = 1 << 20
"""Bytes in one MiB (attachment blobs are this size)."""


@dataclass(frozen=True)
class Metric:
    """One measured quantity.

    Attributes:
        name: stable key (``checkpoint_commit_ms``, ...), used in the JSON report.
        label: what the table prints.
        unit: ``ms``, ``writes/s``, ``MiB``, ``MiB/s``.
        median: median of the samples.
        p95: 95th percentile where it says something (latencies), else ``None``.
        samples: number of samples the median is over.
        vs_floor: the median over the floor's median (same run), for latencies measured against
            it; None otherwise.
    """

    name: str
    label: str
    unit: str
    median: float
    p95: float | None
    samples: int
    vs_floor: float | None = None


@dataclass(frozen=True)
class Ratio:
    """A ratio of two medians, e.g. the replay's time over the plain git loop's."""

    name: str
    label: str
    value: float
    note: str


@dataclass(frozen=True)
class Count:
    """Exact counts for one unit of work (``runtime.bench.counting``): medians over the units
    measured (every unit of a kind costs the same; the median ignores warm-up). ``fsyncs``: the
    client fsyncs (``os.fsync`` / ``os.fdatasync`` of the measuring process), None where they
    were not counted."""

    name: str
    label: str
    statements: float
    round_trips: float
    durable_transactions: float
    units: int
    fsyncs: float | None = None


@dataclass(frozen=True)
class Target:
    """One of the cost targets (:mod:`runtime.bench.targets`): the figure measured, the goal, and
    whether it was met."""

    name: str
    label: str
    value: float
    goal: str
    met: bool


@dataclass
class BenchReport:
    """Everything one ``manage.py bench`` measured.

    Attributes:
        machine: cores, CPU, Python, platform, database engine and version, git version.
        sizes: the :class:`runtime.bench.sizes.BenchSizes` used, as a dict.
        metrics: the measured quantities, in table order.
        ratios: ratios of medians.
        counts: statements, round trips and durable transactions per unit of work.
        targets: the cost targets, met or not (:mod:`runtime.bench.targets`).
        facts: sizes of what was measured (envelope bytes, trace events per replay run, ...).
        scratch: where the throwaway database lived (filled in by the parent).
    """

    machine: dict[str, Any]
    sizes: dict[str, int]
    metrics: list[Metric] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    counts: list[Count] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    scratch: str = ""

    def metric(self, name: str) -> Metric:
        """The metric called ``name``.

        Raises:
            KeyError: no such metric.
        """
        for metric in self.metrics:
            if metric.name == name:
                return metric
        raise KeyError(name)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``metrics`` and ``ratios`` are keyed by name."""
        return {
            "machine": dict(self.machine),
            "sizes": dict(self.sizes),
            "metrics": {m.name: {k: v for k, v in asdict(m).items() if k != "name"}
                        for m in self.metrics},
            "ratios": {r.name: {k: v for k, v in asdict(r).items() if k != "name"}
                       for r in self.ratios},
            "counts": {c.name: {k: v for k, v in asdict(c).items() if k != "name"}
                       for c in self.counts},
            "targets": {t.name: {k: v for k, v in asdict(t).items() if k != "name"}
                        for t in self.targets},
            "facts": dict(self.facts),
            "scratch": self.scratch,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchReport:
        """Inverse of :meth:`as_dict` (the parent reads the child's report with it)."""
        return cls(
            machine=dict(data["machine"]),
            sizes=dict(data["sizes"]),
            metrics=[Metric(name=name, **body) for name, body in data["metrics"].items()],
            ratios=[Ratio(name=name, **body) for name, body in data["ratios"].items()],
            counts=[Count(name=name, **body) for name, body in data.get("counts", {}).items()],
            targets=[Target(name=name, **body) for name, body in data.get("targets", {}).items()],
            facts=dict(data.get("facts", {})),
            scratch=str(data.get("scratch", "")),
        )

    def render(self) -> str:
        """The Markdown ``manage.py bench`` prints: machine and sizes, then tables of medians
        (p95, x floor), counts per unit of work, ratios, and the cost targets met or not."""
        m, s = self.machine, self.sizes
        lines = [
            "# Ratchet benchmarks",
            "",
            f"- machine: {m.get('cores')} cores ({m.get('cpu') or 'cpu unknown'}), "
            f"{m.get('python')}, {m.get('platform')}",
            f"- database: {m.get('database')}; git {m.get('git')}",
            f"- scratch: {self.scratch or '-'}",
            "- sizes: " + ", ".join(f"{k}={v}" for k, v in s.items()),
            "- medians over the samples shown; `x floor` = median / the bare 1 KiB INSERT + "
            "COMMIT measured in this run on the same database",
            "",
            "| metric | median | p95 | unit | x floor | samples |",
            "|---|---:|---:|---|---:|---:|",
        ]
        for metric in self.metrics:
            p95 = "-" if metric.p95 is None else _fmt(metric.p95)
            floor = "-" if metric.vs_floor is None else f"{metric.vs_floor:.1f}x"
            lines.append(f"| {metric.label} | {_fmt(metric.median)} | {p95} | {metric.unit} | "
                         f"{floor} | {metric.samples} |")
        if self.counts:
            lines += ["", "Counted, not timed (exact, on every database the unit touches; "
                      "`runtime/bench/counting.py` says how):", "",
                      "| per unit of work | statements | round trips | durable transactions "
                      "| client fsyncs | units |", "|---|---:|---:|---:|---:|---:|"]
            for c in self.counts:
                fsyncs = "-" if c.fsyncs is None else _num(c.fsyncs)
                lines.append(f"| {c.label} | {_num(c.statements)} | {_num(c.round_trips)} | "
                             f"{_num(c.durable_transactions)} | {fsyncs} | {c.units} |")
        lines += ["", "| ratio | value | what it means |", "|---|---:|---|"]
        for ratio in self.ratios:
            lines.append(f"| {ratio.label} | {ratio.value:.2f} | {ratio.note} |")
        if self.targets:
            lines += ["", "Targets:", "", "| target | measured | goal | met |",
                      "|---|---:|---|---|"]
            for t in self.targets:
                lines.append(f"| {t.label} | {_num(t.value)} | {t.goal} | "
                             f"{'yes' if t.met else '**no**'} |")
        if self.facts:
            lines += ["", "facts: " + ", ".join(f"{k}={v}" for k, v in sorted(self.facts.items()))]
        return "\n".join(lines)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else _fmt(value)


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _p95(values: list[float]) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(sorted(values), n=100, method="inclusive")[94]


def latency_metric(name: str, label: str, seconds: list[float], *,
                   floor_ms: float | None = None) -> Metric:
    """A latency :class:`Metric` in ms (median and p95) from ``seconds`` (at least one sample);
    with ``floor_ms`` (the floor's median) also its ratio to the floor."""
    ms = [s * 1000.0 for s in seconds]
    median = statistics.median(ms)
    return Metric(name=name, label=label, unit="ms", median=median, p95=_p95(ms),
                  samples=len(ms), vs_floor=median / floor_ms if floor_ms else None)


def rate_metric(name: str, label: str, unit: str, values: list[float]) -> Metric:
    """A :class:`Metric` of ``values`` already in ``unit`` (median only: no p95)."""
    return Metric(name=name, label=label, unit=unit, median=statistics.median(values), p95=None,
                  samples=len(values))

