"""What the rules read about one point: its parsed logs, the evidence lines in them, the ranks'
provenance and result record, and the other points of the study (for comparisons).

A point is duck-typed (the report's aggregated point, hpcbench.report.aggregate.Agg): explain sits
upstream of the report and imports nothing of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpcbench.explain.evidence import Evidence, of_files


def parsed_logs(point: Any) -> list[dict[str, Any]]:
    """What hpcbench.parse read from the point's logs (parsed once, on first use, and kept on the sample)."""
    s = next((s for s in point.samples if s.ok), point.samples[0])
    if not s.parsed and s.logs:
        from hpcbench.parse import parse_file

        s.parsed = [parse_file(f) for f in s.logs]
    return s.parsed


def typical_compute(point: Any) -> float | None:
    """The median rank's compute-only step, the lower one of an even count (a straggler's own time is the
    straggler rule's, and with two ranks a plain median would be half of it), else the point's."""
    import statistics

    rec = next((s.record for s in point.samples if s.ok and s.record is not None), None)
    own = [t for t in getattr(rec, "rank_compute_s", None) or [] if t is not None]
    return statistics.median_low(own) if own else point.compute_time_s


@dataclass
class Context:
    point: Any
    others: list[Any]  # every point of the study, this one included
    parsed: list[dict[str, Any]] = field(default_factory=list)
    evidence: Evidence = field(default_factory=Evidence)
    provenance: list[dict[str, Any]] = field(default_factory=list)
    record: Any = None  # the first measured repeat's ResultRecord, where the point has one
    shared: dict[str, Any] = field(default_factory=dict)  # indexes over ``others``, built once for all points

    @classmethod
    def of(cls, point: Any, others: list[Any], shared: dict[str, Any] | None = None) -> Context:
        s = next((s for s in point.samples if s.ok), point.samples[0])
        logs = [p["file"] for p in parsed_logs(point) if p.get("file")] or [str(f) for f in s.logs]
        return cls(point, others, parsed_logs(point), of_files(logs), list(s.provenance), s.record,
                   {} if shared is None else shared)

    def index(self, name: str, build: Any) -> Any:
        """An index over every point, built by ``build(others)`` on first use and shared by all the contexts."""
        if name not in self.shared:
            self.shared[name] = build(self.others)
        return self.shared[name]

    @property
    def nccl(self) -> list[dict[str, Any]]:
        return [p["nccl"] for p in self.parsed if p.get("nccl")]

    @property
    def name(self) -> str:
        return str(self.point.label)

    def transports(self, scope: str | None = None) -> set[str]:
        """NCCL transports the logs show (``scope``: 'intra' or 'inter' node edges only)."""
        if scope is None:
            return {t for n in self.nccl for t in n.get("transports") or []}
        return {e["transport"] for n in self.nccl for e in n.get("edges") or []
                if e.get("scope") == scope and e.get("transport")}

    def network(self) -> str | None:
        return next((n["network"] for n in self.nccl if n.get("network")), None)

    def hosts(self) -> list[str]:
        found = set(self.point.hosts) | {h for n in self.nccl for h in n.get("hosts") or []}
        return sorted(found)

    def env(self, name: str) -> tuple[str | None, str]:
        """An NCCL variable's value and where it shows: the log's 'set by environment' line, else provenance."""
        if name in self.evidence.env:
            value, line = self.evidence.env[name]
            return value, str(line)
        for d in self.provenance:
            if name in (d.get("env") or {}):
                return str(d["env"][name]), f"provenance-rank{d.get('rank', 0)}.json env.{name}"
        return None, ""

    def gpu_models(self) -> set[str]:
        from_prov = {str(g.get("name")) for d in self.provenance for g in d.get("gpus") or [] if g.get("name")}
        return from_prov | self.evidence.gpus
